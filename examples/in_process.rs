//! An application that serves MCP itself, with toolgate's validation added by one layer: no
//! upstream URL, no second process. Run with `cargo run --example in_process`, then call
//! `book_flight` with bad arguments: the handler never sees them.
//!
//! The MCP handler here is deliberately small (stateless, JSON answers, one tool); an
//! application would use its SDK's. What matters is the last line of `app`.

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use toolgate::ValidateLayer;
use toolgate::config::Config;

/// The application: its own `/mcp`, wrapped by toolgate's validation.
pub fn app() -> Router {
    routes().layer(ValidateLayer::new(Config::default()).expect("the default rules load"))
}

/// The application's own routes, before any layer.
pub fn routes() -> Router {
    Router::new().route("/mcp", post(mcp))
}

async fn mcp(body: Bytes) -> Response {
    let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let Some(id) = msg.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match msg["method"].as_str() {
        Some("initialize") => {
            json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
            "serverInfo": {"name": "in-process", "version": "1"}})
        }
        Some("tools/list") => json!({"tools": [{
            "name": "book_flight",
            "description": "Book a flight.",
            "inputSchema": {"type": "object", "properties": {
                "origin": {"type": "string", "pattern": "^[A-Z]{3}$", "description": "IATA code"},
                "passengers": {"type": "integer", "minimum": 1, "maximum": 9}},
                "required": ["origin"]}}]}),
        Some("tools/call") => {
            let args = &msg["params"]["arguments"];
            json!({"content": [{"type": "text", "text": format!("booked from {} for {}", args["origin"], args["passengers"])}]})
        }
        _ => {
            let e = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}});
            return axum::Json(e).into_response();
        }
    };
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

#[allow(dead_code)]
#[tokio::main]
async fn main() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("listening on http://{}/mcp", listener.local_addr().unwrap());
    axum::serve(listener, app()).await.unwrap();
}
