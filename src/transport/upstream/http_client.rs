//! An HTTP tool server: its client ([`crate::net::client`]) with the sessions toolgate keeps
//! there for the era bridge, and toolgate's own requests to it.

use crate::config::Limits;
use crate::error::UpstreamError;
use crate::net::body::{Collected, collect_upstream};
use crate::net::client::ClientError;
use crate::net::client::{HttpClient, Media, media_type, strip_hop_by_hop};
use crate::pipeline::asked::Retries;
use crate::pipeline::guard::{self, ListFailed};
use crate::transport::sse;
use bytes::Bytes;
use http::header::HeaderMap;
use http::{Method, StatusCode, Uri};
use serde_json::value::RawValue;
use std::sync::Arc;

/// One upstream MCP endpoint over HTTP.
pub struct HttpUpstream {
    pub http: HttpClient,
    /// Its 2026-07-28 clients' sessions, when it speaks only the handshake.
    pub bridge: super::http_bridge::HttpBridge,
    /// Requests it answered on numbered streams, which a client may ask it for again.
    pub(crate) numbered: super::numbered::NumberedStreams,
}

impl HttpUpstream {
    /// An upstream at `uri`; `tls` applies to an `https://` one.
    pub fn new(uri: Uri, tls: &crate::config::UpstreamTls) -> Result<HttpUpstream, ClientError> {
        Ok(HttpUpstream {
            http: HttpClient::new(uri, tls)?,
            bridge: Default::default(),
            numbered: Default::default(),
        })
    }

    /// An application's own service as the upstream, its MCP endpoint at `uri`'s path.
    pub(crate) fn in_process(uri: Uri, app: crate::net::client::AppService) -> HttpUpstream {
        HttpUpstream {
            http: HttpClient::in_process(uri, app),
            bridge: Default::default(),
            numbered: Default::default(),
        }
    }
}

/// An HTTP server in a session toolgate keeps, as an input-required round's retry reaches it
/// (`pipeline::asked`): each retry goes with the headers of the request it retries. Owned,
/// since the rounds of an HTTP client's request outlive the request's handler.
pub(crate) struct HttpRetrying {
    up: Arc<HttpUpstream>,
    headers: HeaderMap,
    limits: Limits,
}

impl HttpRetrying {
    pub(crate) fn new(up: Arc<HttpUpstream>, headers: HeaderMap, limits: &Limits) -> Self {
        HttpRetrying {
            up,
            headers,
            limits: limits.clone(),
        }
    }
}

impl Retries for HttpRetrying {
    async fn retry(&self, request: Bytes, id: &str) -> Result<Bytes, UpstreamError> {
        let limits = &self.limits;
        match exchange_message(&self.up, &self.headers, request, id, limits).await {
            Ok((_, answer)) => Ok(answer),
            Err(ListFailed::Unavailable(e)) => Err(e),
            Err(ListFailed::Refused(why)) => Err(UpstreamError::NotJsonRpc(why)),
            // A refusal with a status still answers the retry when its body does.
            Err(ListFailed::Relay(r)) => {
                let status = r.status().as_u16();
                match collect_upstream(r.into_body(), limits.max_response_bytes).await {
                    Ok(Collected::Whole(b)) if guard::match_answer(&b, id).is_some() => Ok(b),
                    _ => Err(UpstreamError::NotJsonRpc(format!(
                        "HTTP {status} without an answer to the request"
                    ))),
                }
            }
        }
    }
}

/// Statuses whose body the client must see as it came: authentication challenges, and a
/// session the server ended (the client re-initializes on that 404).
pub(crate) fn relayed_as_is(status: StatusCode, has_session: bool) -> bool {
    status == StatusCode::UNAUTHORIZED
        || status == StatusCode::FORBIDDEN
        || (status == StatusCode::NOT_FOUND && has_session)
}

/// An answer with no JSON-RPC message in it (an error page, a 405), said by its status and
/// what its body is, alike for a client's request and for toolgate's own.
pub(crate) fn no_message(status: StatusCode, headers: &HeaderMap) -> UpstreamError {
    let what = match media_type(headers) {
        "" => "no content type",
        _ if Media::of(headers) == Media::Json => "a body that is not a JSON-RPC message",
        media => media,
    };
    // Where a server of the HTTP+SSE transport answers a message posted to its event stream.
    let hint = match status {
        StatusCode::METHOD_NOT_ALLOWED => {
            " (this URL takes no messages: `toolgate check` says whether the server speaks the HTTP+SSE transport of 2024-11-05)"
        }
        _ => "",
    };
    UpstreamError::NotJsonRpc(format!("HTTP {} with {what}{hint}", status.as_u16()))
}

/// What becomes of toolgate's own request (a listing) answered with a status that is no
/// success: the response as it came where its client must see it so (an authentication
/// challenge, its session ended, a 4xx refusal of the request itself), the server's error
/// where it answers the request, and otherwise the failure a client's request so answered
/// gets ([`no_message`]) rather than the server's page.
pub(crate) async fn refused(
    resp: Box<axum::response::Response>,
    has_session: bool,
    id: &str,
    limits: &Limits,
) -> ListFailed<Box<axum::response::Response>> {
    let status = resp.status();
    if relayed_as_is(status, has_session) {
        return ListFailed::Relay(resp);
    }
    let (parts, body) = resp.into_parts();
    let Ok(Collected::Whole(bytes)) = collect_upstream(body, limits.max_response_bytes).await
    else {
        return ListFailed::Unavailable(no_message(status, &parts.headers));
    };
    match guard::match_answer(&bytes, id) {
        Some(Err(e)) => ListFailed::Refused(e.0),
        _ if status.is_client_error() && refuses(&bytes) => {
            let body = axum::body::Body::from(bytes);
            ListFailed::Relay(Box::new(axum::response::Response::from_parts(parts, body)))
        }
        _ => ListFailed::Unavailable(no_message(status, &parts.headers)),
    }
}

/// Whether `body` is an error that answers no request of the client's: a refusal of the
/// HTTP request itself (`id` null or absent, or the `"server-error"` Python SDK 1.x servers
/// write).
fn refuses(body: &[u8]) -> bool {
    use crate::jsonrpc::{self, Body};
    jsonrpc::refusal(body).is_some()
        || matches!(jsonrpc::parse(body), Ok(Body::Single(m)) if m.error.is_some() && m.method.is_none())
}

/// Sends one request toolgate wrote and reads the answer to it, from a JSON body or from
/// an SSE stream (other messages on the stream are skipped). Returns the answer's headers
/// (a session id, for `initialize`) and its result.
pub(crate) async fn exchange(
    up: &HttpUpstream,
    headers: &HeaderMap,
    request: Bytes,
    id: &str,
    limits: &Limits,
) -> Result<(HeaderMap, Box<RawValue>), ListFailed<Box<axum::response::Response>>> {
    let (headers, answer) = exchange_message(up, headers, request, id, limits).await?;
    match guard::match_answer(&answer, id) {
        Some(Ok(result)) => Ok((headers, result)),
        Some(Err(e)) => Err(ListFailed::Refused(e.0)),
        None => Err(ListFailed::Refused(
            "the answer is not a JSON-RPC response to the request".into(),
        )),
    }
}

/// [`exchange`], returning the answer whole: the message that answers `id`.
pub(crate) async fn exchange_message(
    up: &HttpUpstream,
    headers: &HeaderMap,
    request: Bytes,
    id: &str,
    limits: &Limits,
) -> Result<(HeaderMap, Bytes), ListFailed<Box<axum::response::Response>>> {
    let resp = up
        .http
        .send(Method::POST, headers.clone(), request, limits.into())
        .await
        .map_err(ListFailed::Unavailable)?;
    if !resp.status().is_success() {
        let (mut parts, body) = resp.into_parts();
        strip_hop_by_hop(&mut parts.headers);
        let relay = axum::response::Response::from_parts(parts, axum::body::Body::new(body));
        return Err(ListFailed::Relay(Box::new(relay)));
    }
    let (parts, body) = resp.into_parts();
    let is_sse = body.media() == Media::EventStream;
    let broke = |e: &dyn std::fmt::Display| {
        ListFailed::Unavailable(UpstreamError::Unreachable(format!(
            "the answer broke off: {e}"
        )))
    };
    let answers = |bytes: &[u8]| guard::match_answer(bytes, id).is_some();
    if !is_sse {
        return match collect_upstream(body, limits.max_response_bytes)
            .await
            .map_err(|e| broke(&e))?
        {
            Collected::Whole(bytes) if answers(&bytes) => Ok((parts.headers, bytes)),
            Collected::Whole(_) => Err(ListFailed::Refused(
                "the answer is not a JSON-RPC response to the request".into(),
            )),
            Collected::TooLarge(_) => Err(ListFailed::Refused(
                "the answer is over max_response_bytes".into(),
            )),
        };
    }
    let mut answer = None;
    let read = sse::each_data(body, limits.max_sse_event_bytes, |d| {
        if !answers(d.as_bytes()) {
            return true;
        }
        answer = Some(Bytes::copy_from_slice(d.as_bytes()));
        false
    })
    .await;
    match (answer, read) {
        (Some(answer), _) => Ok((parts.headers, answer)),
        (None, sse::Read::Broke(e)) => Err(broke(&e)),
        (None, sse::Read::Overflowed) => Err(ListFailed::Refused(
            "an SSE event of the answer is over max_sse_event_bytes".into(),
        )),
        (None, _) => Err(ListFailed::Unavailable(UpstreamError::Unreachable(
            "the stream ended without the answer".into(),
        ))),
    }
}
