//! The one place where toolgate's own answers become HTTP responses.
//!
//! Failures are classified by source, after pingora: the client sent something unusable
//! (400, 403, 413: no id can be trusted, so none is echoed), the upstream failed, or the call
//! broke the tool's contract (a JSON-RPC answer with the request's id). The pipeline writes
//! the JSON-RPC; this decides only the HTTP status, per era.

use crate::jsonrpc;
use crate::mcp::Era;
use crate::pipeline::answer::Answer;
use axum::body::Body;
use axum::response::Response;
use http::{StatusCode, header};

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

/// An answer toolgate wrote for a request. Legacy: 200. Modern: the status follows the code.
pub fn answer(era: Era, a: Answer) -> Response {
    let status = a.error_code.map_or(StatusCode::OK, |c| era.status_for(c));
    json(status, a.body)
}
