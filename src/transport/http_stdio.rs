//! Streamable HTTP in front of a stdio server (`toolgate serve -- CMD`), the sidecar case.
//!
//! Every request is answered as one JSON message: the child's answer, through the same
//! pipeline as any other. Sessions are toolgate's: `initialize` without a session starts a
//! child and mints the id; requests without a session go to the shared child with their ids
//! remapped, so concurrent stateless clients cannot collide. A session's GET is an SSE stream
//! of what its child sends on its own.

use super::http_request::{Context, Note, Route};
use super::reply;
use super::stdio::ChildLister;
use super::stdio_pool::{NoChild, SessionChild, StdioPool};
use crate::jsonrpc::{self, Message};
use crate::mcp::{self, Era};
use crate::pipeline::answer::Answer;
use crate::pipeline::guard::{self, Call, Decision};
use crate::pipeline::{self, Kind, Pending};
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, StatusCode};
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::sync::Arc;

fn no_child(era: Era, m: &Message<'_>, e: NoChild, max: usize) -> Response {
    match e {
        NoChild::UnknownSession => reply::json(
            StatusCode::NOT_FOUND,
            jsonrpc::error_response(m.id, jsonrpc::INVALID_REQUEST, "Session not found", None),
        ),
        NoChild::TooMany => {
            let msg = format!(
                "Too many sessions: this gateway runs at most {max} tool server processes; try again later"
            );
            reply::json(
                StatusCode::SERVICE_UNAVAILABLE,
                jsonrpc::error_response(m.id, jsonrpc::INTERNAL_ERROR, &msg, None),
            )
        }
        NoChild::TooManyForClient(n) => {
            let msg = format!(
                "Too many sessions: this client already holds {n}, the most one client may; end one (DELETE) or try again later"
            );
            reply::json(
                StatusCode::TOO_MANY_REQUESTS,
                jsonrpc::error_response(m.id, jsonrpc::INTERNAL_ERROR, &msg, None),
            )
        }
        NoChild::Failed(why) => {
            let is_call = m.method() == Some(mcp::TOOLS_CALL);
            let e = crate::pipeline::UpstreamError::Unreachable(why);
            reply::answer(era, Answer::upstream_failed(era, m.id, is_call, &e))
        }
    }
}

/// The `requestId` a `notifications/cancelled` names.
fn cancelled_id<'a>(m: &Message<'a>) -> Option<&'a RawValue> {
    #[derive(serde::Deserialize)]
    struct Cancelled<'a> {
        #[serde(borrow, rename = "requestId")]
        request_id: &'a RawValue,
    }
    serde_json::from_str::<Cancelled<'a>>(m.raw_params()?.get())
        .ok()
        .map(|c| c.request_id)
}

/// Who a session belongs to: the authenticated name, else the client's address.
fn owner(rt: &Route<'_>, ctx: &Context) -> String {
    match &ctx.client {
        Some(c) => format!("client:{}", c.name),
        None => format!("addr:{}", rt.peer),
    }
}

/// The message with its top-level `id` replaced (shared child only).
fn with_id(bytes: &[u8], id: &RawValue) -> Option<Bytes> {
    let mut top: BTreeMap<String, Box<RawValue>> = serde_json::from_slice(bytes).ok()?;
    top.insert("id".into(), id.to_owned());
    serde_json::to_vec(&top).ok().map(Bytes::from)
}

pub(super) async fn post(
    rt: &Route<'_>,
    pool: &StdioPool,
    headers: &HeaderMap,
    bytes: Bytes,
    m: &mut Message<'_>,
    ctx: &Context,
    note: &mut Note,
) -> Response {
    let era = ctx.era(m.version_text());
    let max = rt.gw.config.stdio.max_sessions;
    let session = headers.get(mcp::SESSION_ID).and_then(|v| v.to_str().ok());
    let (sc, new_session, shared): (Arc<SessionChild>, Option<String>, bool) =
        match (session, m.method()) {
            (None, Some("initialize")) => match pool.open(&owner(rt, ctx)) {
                Ok((id, sc)) => (sc, Some(id), false),
                Err(e) => return no_child(era, m, e, max),
            },
            (Some(s), _) => match pool.session(s) {
                Ok(sc) => (sc, None, false),
                Err(e) => return no_child(era, m, e, max),
            },
            (None, _) => match pool.shared(era).await {
                Ok(sc) => (sc, None, true),
                Err(e) => return no_child(era, m, e, max),
            },
        };
    let key = match &new_session {
        Some(id) => rt.gw.scope(rt.target, Some(id.as_bytes()), None),
        None => ctx.key,
    };
    let Some(client_id) = m.id.filter(|_| m.is_request()) else {
        // Notifications and the client's answers to server requests. A cancellation also
        // ends the POST still waiting for that request (in a session, where ids are the
        // client's own; the shared child's are remapped).
        if !shared
            && m.method() == Some("notifications/cancelled")
            && let Some(id) = cancelled_id(m)
        {
            sc.child.cancel(id.get());
        }
        note.outcome = "forwarded";
        return match sc.child.send(bytes) {
            Ok(()) => Response::builder()
                .status(StatusCode::ACCEPTED)
                .body(Body::empty())
                .expect("valid response"),
            Err(e) => reply::transport(
                StatusCode::BAD_GATEWAY,
                jsonrpc::INTERNAL_ERROR,
                &format!("Upstream MCP server unavailable: {e}"),
            ),
        };
    };
    let timeout = rt.gw.config.limits.upstream_timeout;
    let (body, kind) = if m.method() == Some(mcp::TOOLS_CALL) {
        let lister = ChildLister {
            child: &sc.child,
            timeout,
        };
        let call = Call {
            target: rt.target,
            key: &key,
            era,
            id: client_id,
            params: m.params.take(),
            bytes: &bytes,
            client: ctx.client.as_ref(),
            retry: false,
        };
        match guard::tools_call(rt.gw, call, &lister).await {
            Decision::Forward(body, kind) => (body, kind),
            Decision::Answer(a) => {
                note.outcome = "answered";
                note.validation = a.outcome;
                return reply::answer(era, a);
            }
            Decision::Relay(never) => match never {},
        }
    } else {
        (bytes.clone(), pipeline::classify(m))
    };
    // The tool's name is only for the access log.
    if note.wants_names(rt.gw)
        && let Kind::Call { tool, outcome, .. } = &kind
    {
        note.tool = Some(tool.clone());
        note.validation = Some(outcome);
    }
    let is_call = matches!(kind, Kind::Call { .. });
    let (body, wire_id) = if shared {
        let ours = RawValue::from_string(
            serde_json::to_string(&rt.gw.next_id()).expect("a string serializes"),
        )
        .expect("a JSON string");
        (
            with_id(&body, &ours).unwrap_or(body),
            ours.get().to_string(),
        )
    } else {
        (body, client_id.get().to_string())
    };
    let answer = match sc.child.request(body, &wire_id, timeout).await {
        Ok(a) => a,
        Err(e) => {
            note.outcome = "upstream_error";
            if let Kind::Call { tool, .. } = &kind {
                rt.gw
                    .metrics
                    .tool_calls
                    .inc(&[&rt.target.name, tool, "upstream_error"]);
            }
            return reply::answer(
                era,
                Answer::upstream_failed(era, Some(client_id), is_call, &e),
            );
        }
    };
    note.outcome = "forwarded";
    let answer = if shared {
        with_id(&answer, client_id).unwrap_or(answer)
    } else {
        answer
    };
    let pending = Pending {
        id: Some(client_id.to_owned()),
        kind,
        era,
        key,
        target: rt.target.clone(),
        client: ctx.client.clone(),
    };
    let (status, body) = match jsonrpc::parse(&answer) {
        Ok(jsonrpc::Body::Single(am)) => {
            match pipeline::observe(rt.gw, &pending, &am).replacement {
                Some(a) => (
                    a.error_code.map_or(StatusCode::OK, |c| era.status_for(c)),
                    a.body,
                ),
                None => (StatusCode::OK, answer.to_vec()),
            }
        }
        _ => (StatusCode::OK, answer.to_vec()),
    };
    let mut resp = reply::json(status, body);
    if let Some(id) = new_session
        && let Ok(v) = HeaderValue::from_str(&id)
    {
        resp.headers_mut().insert(mcp::SESSION_ID, v);
    }
    resp
}

/// GET: the session's stream of what its child sends on its own. DELETE: end the session.
pub(super) async fn bodiless(
    pool: &StdioPool,
    method: &http::Method,
    headers: &HeaderMap,
    note: &mut Note,
) -> Response {
    let Some(session) = headers
        .get(mcp::SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
    else {
        note.outcome = "answered";
        let mut r = reply::transport(
            StatusCode::METHOD_NOT_ALLOWED,
            jsonrpc::INVALID_REQUEST,
            "Method not allowed without a session",
        );
        r.headers_mut()
            .insert(http::header::ALLOW, HeaderValue::from_static("POST"));
        return r;
    };
    note.outcome = "answered";
    if method == http::Method::DELETE {
        return if pool.close(&session).await {
            Response::builder()
                .status(StatusCode::OK)
                .body(Body::empty())
                .expect("valid response")
        } else {
            reply::transport(
                StatusCode::NOT_FOUND,
                jsonrpc::INVALID_REQUEST,
                "Session not found",
            )
        };
    }
    let sc = match pool.session(&session) {
        Ok(sc) => sc,
        Err(_) => {
            return reply::transport(
                StatusCode::NOT_FOUND,
                jsonrpc::INVALID_REQUEST,
                "Session not found",
            );
        }
    };
    let (earlier, rx) = sc.subscribe();
    let earlier = futures_util::stream::iter(
        earlier
            .into_iter()
            .map(|line| Ok::<_, std::convert::Infallible>(super::sse::event(&line))),
    );
    let live = futures_util::stream::unfold(rx, |mut rx| async move {
        loop {
            match rx.recv().await {
                Ok(line) => {
                    return Some((
                        Ok::<_, std::convert::Infallible>(super::sse::event(&line)),
                        rx,
                    ));
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!("a slow GET stream missed {n} messages")
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    use futures_util::StreamExt;
    let stream = earlier.chain(live);
    Response::builder()
        .header(CONTENT_TYPE, "text/event-stream")
        .header(CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .expect("valid response")
}
