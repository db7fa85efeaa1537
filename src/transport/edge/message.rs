//! One POSTed JSON-RPC body as the edge reads it, whether the gateway's own front or the
//! in-process layer: its bytes under the size limit, its parse, and the checks that come
//! before its way to the server is found (the 2026-07-28 header rules, which compare headers
//! with the parsed body, and a `tools/call` sent as a notification).

use super::request::Caller;
use crate::gateway::{Gateway, Target};
use crate::jsonrpc::{self, Body as Parsed, Message};
use crate::mcp::Era;
use crate::net::body::{ReadError, read_counted};
use crate::pipeline::engine;
use crate::policy::held::{ByteBudget, Held};
use crate::transport::exchange::reply;
use crate::transport::modern;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, StatusCode};
use std::future::Future;
use std::task::Poll;

/// The edge's refusal of a message before it is decided: the response it gets.
pub(super) type Refused = Box<Response>;

/// The body, read under the size limit and within `limits.body_timeout` (and without a byte
/// order mark it opens with, `text::without_bom`), with its share of
/// the bytes the front may hold at once ([`Gateway::body_bytes`]), to be kept until the request is
/// answered; `Err` is the 413, 400, 408 or 503 refusing it. A declared length over the limit
/// is refused before any of the body is read, and so is one longer than the room left. The
/// share counts the bytes as they come, not the length a body declares: counted from its
/// head, a body that declares much and sends nothing would hold room it never uses, and one
/// HTTP/2 connection could fill the budget with the heads of a few streams, every other
/// client refused. A body already whole is read and counted at its first poll (one atomic
/// operation, as a share taken from its head would be), and its timer never armed.
pub(super) async fn read<B>(body: B, gw: &Gateway) -> Result<(Bytes, Held<&ByteBudget>), Refused>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let limits = &gw.config.limits;
    let limit = limits.max_body_bytes;
    let declared = usize::try_from(body.size_hint().lower()).unwrap_or(usize::MAX);
    if declared > limit {
        return Err(too_large(limit));
    }
    if !gw.body_bytes.has_room(declared) {
        return Err(Box::new(no_room()));
    }
    let mut held = gw.body_bytes.share();
    let read = {
        let mut read = std::pin::pin!(read_counted(body, limit, |n| held.try_grow(n)));
        // Most bodies came with their head: read at once, with no timer made for them. (A
        // block, so that the first poll's outcome is not kept while the timer is awaited.)
        'read: {
            if let Poll::Ready(r) =
                std::future::poll_fn(|cx| Poll::Ready(read.as_mut().poll(cx))).await
            {
                break 'read Ok(r);
            }
            tokio::time::timeout(limits.body_timeout, read).await
        }
    };
    match read {
        Ok(Ok(b)) => Ok((crate::text::without_bom(b), held)),
        Ok(Err(ReadError::TooLarge)) => Err(too_large(limit)),
        Ok(Err(ReadError::NoRoom)) => Err(Box::new(no_room())),
        Ok(Err(ReadError::Broken(e))) => Err(Box::new(reply::transport(
            StatusCode::BAD_REQUEST,
            jsonrpc::PARSE_ERROR,
            &format!("Parse error: the body could not be read: {e}"),
        ))),
        Err(_) => Err(Box::new(reply::transport(
            StatusCode::REQUEST_TIMEOUT,
            jsonrpc::INVALID_REQUEST,
            &format!(
                "Invalid Request: the body did not arrive within {:?}",
                limits.body_timeout
            ),
        ))),
    }
}

fn too_large(limit: usize) -> Refused {
    Box::new(reply::transport(
        StatusCode::PAYLOAD_TOO_LARGE,
        jsonrpc::INVALID_REQUEST,
        &format!("Invalid Request: the body is over the {limit}-byte limit"),
    ))
}

/// The 503 for a body the front has no room to hold: a client that retries shortly finds
/// room once the requests before it are answered.
fn no_room() -> Response {
    let mut resp = reply::transport(
        StatusCode::SERVICE_UNAVAILABLE,
        jsonrpc::INTERNAL_ERROR,
        "Server busy: toolgate holds as many bytes of requests as it may at once; try again shortly",
    );
    resp.headers_mut().insert(
        http::header::RETRY_AFTER,
        http::HeaderValue::from_static("1"),
    );
    resp
}

/// The body as JSON-RPC; `Err` is the 400 with `-32700` or `-32600` (under the request's id
/// where it has one).
pub(super) fn parse(bytes: &Bytes) -> Result<Parsed<'_>, Refused> {
    jsonrpc::parse_from_client(bytes)
        .map_err(|rejection| Box::new(reply::json(StatusCode::BAD_REQUEST, rejection.answer())))
}

/// A message whose headers do not say what its 2026-07-28 body says; `Err` is the 400.
pub(super) fn header_rules(
    headers: &HeaderMap,
    ctx: &Caller,
    m: &Message<'_>,
    era: Era,
) -> Result<(), Refused> {
    let id = if m.is_request() { m.id } else { None };
    // A body in the 2026-07-28 envelope is held to that era's header rules whatever the
    // headers claim: a missing or older `MCP-Protocol-Version` must not switch them off.
    let body_era = match ctx.version() {
        None => era,
        Some(_) => Era::detect(None, || m.names_version()),
    };
    if (era == Era::Modern || body_era == Era::Modern)
        && let Err(why) = modern::check(headers, m)
    {
        let message = format!("Header mismatch: {why}");
        return Err(Box::new(reply::json(
            StatusCode::BAD_REQUEST,
            jsonrpc::error_response(id, modern::HEADER_MISMATCH, &message, None),
        )));
    }
    Ok(())
}

/// The checks before a way to the server is settled ([`engine::admit`]); `Err` is
/// toolgate's 400.
pub(super) fn call_notification(
    gw: &Gateway,
    target: &Target,
    m: &Message<'_>,
) -> Result<(), Refused> {
    engine::admit(gw, target, m).map_err(|why| {
        Box::new(reply::transport(
            StatusCode::BAD_REQUEST,
            jsonrpc::INVALID_REQUEST,
            why,
        ))
    })
}
