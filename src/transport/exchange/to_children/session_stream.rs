//! A session's GET (the stream of what its child sends on its own) and DELETE.

use crate::jsonrpc;
use crate::mcp;
use crate::transport::exchange::{Note, reply};
use crate::transport::upstream::children::StdioPool;
use axum::body::Body;
use axum::response::Response;
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderMap, StatusCode};

/// GET: the session's stream of what its child sends on its own. DELETE: end the session.
pub(crate) async fn bodiless(
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
        return reply::method_not_allowed("no session to stream or end", "POST");
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
            .map(|line| Ok::<_, std::convert::Infallible>(crate::transport::sse::event(&line))),
    );
    let live = futures_util::stream::unfold(rx, |mut rx| async move {
        let line = rx.recv().await?;
        let event = crate::transport::sse::event(&line);
        Some((Ok::<_, std::convert::Infallible>(event), rx))
    });
    use futures_util::StreamExt;
    let stream = earlier.chain(live);
    Response::builder()
        .header(CONTENT_TYPE, "text/event-stream")
        .header(CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .expect("valid response")
}
