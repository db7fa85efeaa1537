//! toolgate as a library: the example application (`examples/in_process.rs`), which serves MCP
//! itself and adds toolgate's validation with one `.layer(...)`, driven in-process and over
//! real HTTP.

#[path = "../../examples/in_process.rs"]
#[allow(dead_code)]
mod example;

use crate::common;
use axum::body::Body;
use http::Request;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

async fn ask(body: Value) -> (u16, Value) {
    let req = Request::post("/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(Body::from(body.to_string()))
        .unwrap();
    let resp = example::app().oneshot(req).await.unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

fn call(id: i64, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "book_flight", "arguments": args}})
}

#[tokio::test]
async fn the_layer_answers_bad_calls_itself_and_lets_good_ones_in() {
    let (status, a) = ask(call(1, json!({"origin": "LHR", "passengers": 2}))).await;
    assert_eq!(status, 200);
    assert_eq!(
        a["result"]["content"][0]["text"],
        "booked from \"LHR\" for 2"
    );
    // Coerced on the way in.
    let (_, a) = ask(call(2, json!({"origin": "LHR", "passengers": "3"}))).await;
    assert_eq!(
        a["result"]["content"][0]["text"],
        "booked from \"LHR\" for 3"
    );
    // Refused: the handler never runs.
    let (_, a) = ask(call(3, json!({"origin": "lhr", "pasengers": 2}))).await;
    assert_eq!(a["result"]["isError"], true, "{a}");
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({
            "/origin": "must match the pattern ^[A-Z]{3}$, got \"lhr\"",
            "/pasengers": "is not a parameter of this tool; did you mean \"passengers\"?"
        })
    );
    let (_, a) = ask(call(4, json!({}))).await;
    assert!(
        a["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("origin: is required but missing"),
        "{a}"
    );
    let (_, a) = ask(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "book_flihgt", "arguments": {}}})).await;
    assert_eq!(
        a["error"]["message"],
        "Unknown tool: book_flihgt. Did you mean \"book_flight\"?"
    );
    // Everything else passes untouched.
    let (_, a) = ask(json!({"jsonrpc": "2.0", "id": 6, "method": "tools/list"})).await;
    assert_eq!(a["result"]["tools"][0]["name"], "book_flight");
}

#[tokio::test]
async fn the_example_serves_over_http() {
    let addr = common::serve_on_loopback(example::app()).await;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let req = Request::post(format!("http://{addr}/mcp"))
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(bytes::Bytes::from(
            call(1, json!({"origin": "LHR", "passengers": 12})).to_string(),
        )))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    let a: Value =
        serde_json::from_slice(&resp.into_body().collect().await.unwrap().to_bytes()).unwrap();
    assert_eq!(a["result"]["isError"], true, "{a}");
}

/// An application whose own authentication names its clients: alice may not book.
fn app_with_clients() -> axum::Router {
    let config: toolgate::config::Config = toolgate::config::Config::load(
        Some(
            &common::tempfile_lite::TempFile::new(
                "[clients.alice]\ndeny_tools = [\"book_flight\"]\n",
            )
            .path,
        ),
        &toolgate::config::Overrides::default(),
    )
    .unwrap();
    // The application's authentication, reduced to a header it trusts.
    let authenticate = axum::middleware::from_fn(
        |mut req: Request<Body>, next: axum::middleware::Next| async move {
            if let Some(name) = req.headers().get("x-user").and_then(|v| v.to_str().ok()) {
                let name = toolgate::ClientName(name.into());
                req.extensions_mut().insert(name);
            }
            next.run(req).await
        },
    );
    example::routes()
        .layer(toolgate::ValidateLayer::new(config).unwrap())
        .layer(authenticate)
}

async fn ask_as(app: axum::Router, user: Option<&str>, body: Value) -> (u16, Value) {
    let mut req = Request::post("/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(u) = user {
        req = req.header("x-user", u);
    }
    let resp = app
        .oneshot(req.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn the_client_the_application_names_gets_its_own_rules() {
    let booking = call(1, json!({"origin": "LHR", "passengers": 2}));
    let (_, a) = ask_as(app_with_clients(), Some("alice"), booking.clone()).await;
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "The tool \"book_flight\" is not available: this client's policy does not allow it. Use another tool."}],
            "isError": true,
            "_meta": {"toolgate/policy": {"code": "tool_denied", "tool": "book_flight"}}}})
    );
    let (_, a) = ask_as(app_with_clients(), Some("bob"), booking.clone()).await;
    assert_eq!(
        a["result"]["content"][0]["text"],
        "booked from \"LHR\" for 2"
    );
    let (_, a) = ask_as(app_with_clients(), None, booking).await;
    assert_eq!(
        a["result"]["content"][0]["text"],
        "booked from \"LHR\" for 2"
    );
}

#[tokio::test]
async fn a_batch_holding_a_call_is_refused_as_the_gateway_refuses_it() {
    let batch = json!([call(1, json!({"origin": "LHR"})), {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]);
    let (status, a) = ask(batch).await;
    assert_eq!(status, 400);
    let refused = |id| {
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600,
            "message": "Invalid Request: toolgate does not accept tools/call inside a batch; send each call on its own"}})
    };
    assert_eq!(a, json!([refused(1), refused(2)]));
}
