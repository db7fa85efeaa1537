//! What goes to an HTTP server past the MCP rules: GET (its stream), DELETE (the end of a
//! session) and a batch. Each is forwarded as it came and its answer read by no rule; a
//! reverse-bridged session, which is toolgate's own, is served here.

use super::request::{Caller, Route};
use crate::mcp::{self, Era};
use crate::pipeline::{Kind, Pending};
use crate::transport::exchange::Note;
use crate::transport::exchange::answers::Reading;
use crate::transport::exchange::to_http::{self, reversed_session};
use crate::transport::exchange::{reply, subscription};
use crate::transport::upstream::http_client::HttpUpstream;
use axum::response::Response;
use bytes::Bytes;
use http::Method;
use http::request::Parts;
use std::sync::Arc;

/// GET (the server's stream) and DELETE (the end of the session), forwarded; toolgate's own
/// reverse-bridged sessions are served here.
pub(super) async fn bodiless(
    rt: &Route<'_>,
    up: &Arc<HttpUpstream>,
    parts: Box<Parts>,
    ctx: &Caller,
    note: &mut Note,
) -> Response {
    let era = ctx.era(|| false);
    let is_delete = parts.method == Method::DELETE;
    if let Some(reverse) = reversed_session(up, &parts.headers) {
        // toolgate's own session for the client: it ends here, and its stream carries what
        // the server announces, which toolgate follows for it.
        note.outcome = "answered";
        if is_delete {
            let id = parts
                .headers
                .get(mcp::SESSION_ID)
                .and_then(|v| v.to_str().ok());
            up.bridge.end_reversed(id.unwrap_or_default());
            return reply::ok();
        }
        let server = (rt.gw, up, &rt.target.limits);
        return subscription::announced(server, reverse, &parts.headers);
    }
    let pending = passing(rt, ctx, era);
    let mut reading = Reading::of(ctx.has_session());
    if !is_delete && ctx.has_session() {
        // A client resuming a stream it lost gets the answers there under their rules.
        reading.replays_of = Some(up.clone());
    }
    let resp = to_http::forward(rt.to_http(up), parts, Bytes::new(), pending, reading, note).await;
    if is_delete && resp.status().is_success() && ctx.has_session() {
        rt.gw.catalog.forget(&ctx.key);
    }
    resp
}

/// A batch (2025-03-26), which only an HTTP server takes whole (`step::batch`): it goes as
/// it came, and its answer comes back as it is.
pub(super) async fn batch(
    rt: &Route<'_>,
    up: &Arc<HttpUpstream>,
    parts: Box<Parts>,
    body: Bytes,
    ctx: &Caller,
    note: &mut Note,
) -> Response {
    let pending = passing(rt, ctx, Era::Legacy);
    let reading = Reading::of(ctx.has_session());
    to_http::forward(rt.to_http(up), parts, body, pending, reading, note).await
}

/// What is waited for on a message no rule reads the answer of.
fn passing(rt: &Route<'_>, ctx: &Caller, era: Era) -> Pending {
    Pending {
        id: None,
        kind: Kind::Other,
        era,
        key: ctx.key,
        target: rt.target.clone(),
        client: ctx.client.clone(),
        bridged: None,
    }
}
