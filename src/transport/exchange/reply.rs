//! The one place where toolgate's own answers become HTTP responses.
//!
//! Failures are classified by source, after pingora: the client sent something unusable
//! (400, 403, 413: under no id, but for a request whose id reads one way and each request of
//! a refused batch), the upstream failed, or the call broke the tool's contract (a JSON-RPC
//! answer with the request's id). The pipeline writes the JSON-RPC; this decides only the
//! HTTP status, per era.

use super::Note;
use crate::error::UpstreamError;
use crate::gateway::{Gateway, Target};
use crate::jsonrpc;
use crate::mcp::Era;
use crate::pipeline::answer::{Answer, Requested};
use crate::pipeline::{self, Pending};
use axum::body::Body;
use axum::response::Response;
use http::{StatusCode, header};

pub fn json(status: StatusCode, body: impl Into<Body>) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body.into())
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

/// The server could not be reached or did not answer (`pipeline::unanswered`). A
/// notification or a client's answer, which has no JSON-RPC answer to carry the failure, gets
/// 502.
pub(crate) fn upstream_failed(
    gw: &Gateway,
    pending: &Pending,
    e: &UpstreamError,
    note: &mut Note,
) -> Response {
    note.outcome = e.outcome();
    unanswered(gw, pending, e)
}

/// [`upstream_failed`] once the request's note is settled (an answer that broke off).
pub(crate) fn unanswered(gw: &Gateway, pending: &Pending, e: &UpstreamError) -> Response {
    match pipeline::unanswered(gw, pending, e) {
        Some(a) => answer(pending.era, a),
        None => undelivered(gw, &pending.target, e),
    }
}

/// 502 for a notification or a client's answer the server could not be given: there is no
/// JSON-RPC answer to carry the failure.
pub(crate) fn undelivered(gw: &Gateway, target: &Target, e: &UpstreamError) -> Response {
    let a = pipeline::failed(gw, target, Era::Legacy, None, Requested::Other, e);
    json(StatusCode::BAD_GATEWAY, a.body)
}

/// 405 for an HTTP method the endpoint does not take (`why`), naming those it does (`allow`).
pub(crate) fn method_not_allowed(why: &str, allow: &'static str) -> Response {
    let mut r = transport(
        StatusCode::METHOD_NOT_ALLOWED,
        jsonrpc::INVALID_REQUEST,
        &format!("Method not allowed: {why}"),
    );
    r.headers_mut()
        .insert(header::ALLOW, http::HeaderValue::from_static(allow));
    r
}

/// 202: a notification or a client's answer, taken.
pub fn accepted() -> Response {
    empty(StatusCode::ACCEPTED)
}

/// 200 with no body: a session ended.
pub fn ok() -> Response {
    empty(StatusCode::OK)
}

fn empty(status: StatusCode) -> Response {
    Response::builder()
        .status(status)
        .body(Body::empty())
        .expect("static response parts are valid")
}
