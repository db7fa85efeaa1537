//! The one place where toolgate's own answers become HTTP responses.
//!
//! Failures are classified by source, after pingora: the client sent something unusable,
//! the upstream failed, or the call broke the tool's contract. Each class has one shape here,
//! so every transport and every rule answers alike.

use crate::jsonrpc;
use crate::mcp::{self, Era};
use crate::upstream::UpstreamError;
use axum::body::Body;
use axum::response::Response;
use http::{StatusCode, header};
use serde_json::Value;
use serde_json::value::RawValue;

pub fn json(status: StatusCode, body: Vec<u8>) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .expect("static response parts are valid")
}

/// A transport-level rejection (bad JSON, too large, forbidden origin): the id could not be
/// trusted or read, so the error carries none.
pub fn transport(status: StatusCode, code: i64, message: &str) -> Response {
    json(status, jsonrpc::error_response(None, code, message, None))
}

/// A JSON-RPC error answering a request, with the HTTP status its era asks for.
pub fn rpc_error(
    era: Era,
    id: Option<&RawValue>,
    code: i64,
    message: &str,
    data: Option<&Value>,
) -> Response {
    json(
        era.status_for(code),
        jsonrpc::error_response(id, code, message, data),
    )
}

/// A result toolgate produced for a request (a tool error the model reads).
pub fn result(id: &RawValue, result: &Value) -> Response {
    json(StatusCode::OK, jsonrpc::result_response(id, result))
}

/// The text a model reads when the tool server itself could not be reached.
pub fn unavailable_text(e: &UpstreamError) -> String {
    let retry = match e {
        UpstreamError::Timeout(_) => {
            "It may still be working or overloaded; retrying later may help."
        }
        UpstreamError::Unreachable(_) => {
            "Retrying in a moment may help if the server is restarting."
        }
    };
    format!("The tool server is unavailable: {e}. {retry}")
}

/// The upstream gave no answer. A `tools/call` gets a tool error the model can act on;
/// any other request gets `-32603`; a message without an id gets a 502 with a JSON-RPC body.
pub fn upstream_failed(
    era: Era,
    id: Option<&RawValue>,
    is_tool_call: bool,
    e: &UpstreamError,
) -> Response {
    match id {
        Some(id) if is_tool_call => {
            let details =
                serde_json::json!({"code": "upstream_unavailable", "reason": e.to_string()});
            result(
                id,
                &mcp::tool_error(
                    era,
                    unavailable_text(e),
                    Some(("toolgate/upstream", details)),
                ),
            )
        }
        Some(id) => rpc_error(
            era,
            Some(id),
            jsonrpc::INTERNAL_ERROR,
            &format!("Upstream MCP server unavailable: {e}"),
            None,
        ),
        None => transport(
            StatusCode::BAD_GATEWAY,
            jsonrpc::INTERNAL_ERROR,
            &format!("Upstream MCP server unavailable: {e}"),
        ),
    }
}
