//! The HTTP client side: one pooled hyper client, header hygiene, and bounded reads.
//!
//! End-to-end headers (`Mcp-Session-Id`, `MCP-Protocol-Version`, `Last-Event-ID`,
//! `Authorization`, `Mcp-Param-*`, and any other) pass both ways; hop-by-hop headers and the
//! ones named in `Connection` do not. `Accept-Encoding` is dropped on the way up so that
//! answers toolgate may need to read arrive uncompressed.

use crate::config::Limits;
use crate::pipeline::UpstreamError;
use crate::pipeline::guard::{self, ListFailed};
use crate::transport::sse::{self, Split, Splitter};
use crate::transport::upstream::pool::Pool;
use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, Uri};
use http_body::Body as _;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::value::RawValue;
use std::time::Duration;

/// How long an upstream may take: `answer` bounds the response head and then a JSON body
/// whole; `stream_gap` bounds the silence between frames of an SSE answer to a request. The
/// stream a GET opens is bounded by neither after its head.
#[derive(Debug, Clone, Copy)]
pub struct Wait {
    pub answer: Duration,
    pub stream_gap: Duration,
}

impl From<&crate::config::Limits> for Wait {
    fn from(l: &crate::config::Limits) -> Wait {
        Wait {
            answer: l.upstream_timeout,
            stream_gap: l.stream_gap_timeout,
        }
    }
}

/// An upstream's response body, under the [`Wait`] in force when it was asked for. An
/// upstream that sends its head and then stalls fails the body with [`BodyError::Stalled`],
/// which every reader already turns into an answer for the client.
///
/// The timer is made only when the body first has to wait: an answer that arrives with its
/// head (the common case) costs no allocation and no timer registration.
pub struct UpstreamBody {
    inner: Incoming,
    timer: Option<Timer>,
    started: tokio::time::Instant,
    sleep: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    /// A frame came since the timer was last set (gap timers only).
    restart: bool,
}

#[derive(Clone, Copy)]
enum Timer {
    /// One deadline for the whole body, counted from the request.
    Whole(Duration),
    /// The longest wait for the next frame.
    Gap(Duration),
}

#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("{0}")]
    Upstream(#[from] hyper::Error),
    #[error("the tool server sent nothing more for {0:?}")]
    Stalled(Duration),
}

impl http_body::Body for UpstreamBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, BodyError>>> {
        use std::task::Poll;
        let this = &mut *self;
        if let Poll::Ready(frame) = std::pin::Pin::new(&mut this.inner).poll_frame(cx) {
            this.restart = true;
            return Poll::Ready(frame.map(|f| f.map_err(BodyError::from)));
        }
        let Some(timer) = this.timer else {
            return Poll::Pending;
        };
        let now = tokio::time::Instant::now;
        let sleep = match (&mut this.sleep, timer) {
            (Some(sleep), Timer::Gap(d)) if this.restart => {
                sleep.as_mut().reset(now() + d);
                sleep
            }
            (Some(sleep), _) => sleep,
            (slot @ None, t) => slot.insert(Box::pin(tokio::time::sleep_until(match t {
                Timer::Whole(d) => this.started + d,
                Timer::Gap(d) => now() + d,
            }))),
        };
        this.restart = false;
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        this.timer = None;
        let (Timer::Whole(d) | Timer::Gap(d)) = timer;
        Poll::Ready(Some(Err(BodyError::Stalled(d))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// One upstream MCP endpoint over HTTP. The wait for an answer is the caller's: the gateway
/// passes the one in force, so a reload changes it for the next request.
pub struct HttpUpstream {
    pub uri: Uri,
    /// The endpoint's path, as a request line carries it.
    path: Uri,
    pool: Pool,
    /// The `Host` every request carries, built once.
    host: Option<HeaderValue>,
    /// Its 2026-07-28 clients' sessions, when it speaks only the handshake.
    pub bridge: super::http_bridge::HttpBridge,
}

/// `Host` for a request to `uri`: its host, with the port when it is not the scheme's own.
fn host_header(uri: &Uri) -> Option<HeaderValue> {
    let host = uri.host()?;
    let default = if uri.scheme_str() == Some("https") {
        443
    } else {
        80
    };
    let text = match uri.port_u16() {
        Some(port) if port != default => format!("{host}:{port}"),
        _ => host.to_string(),
    };
    HeaderValue::from_str(&text).ok()
}

/// Whether a header belongs to one hop (RFC 9110 section 7.6.1, and the common
/// `Proxy-Connection`). A match on the name compiles to a length switch: cheaper than
/// comparing each header with a list of names.
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "proxy-connection"
    )
}

/// Removes the headers that belong to one hop (and the ones `Connection` names), in place:
/// what is left is the end-to-end exchange.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Nearly every message carries Content-Length and nothing else of the kind: it goes
    // directly, and the full pass runs only when something else is there. (`Host` names the
    // request's target: `send_to` sets the upstream's.)
    headers.remove(header::CONTENT_LENGTH);
    if !headers.keys().any(hop_by_hop) {
        return;
    }
    let named_in_connection = |name: &HeaderName, headers: &HeaderMap| {
        headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|s| s.trim().eq_ignore_ascii_case(name.as_str()))
    };
    let has_connection = headers.contains_key(header::CONNECTION);
    let doomed: Vec<HeaderName> = headers
        .keys()
        .filter(|name| hop_by_hop(name) || (has_connection && named_in_connection(name, headers)))
        .cloned()
        .collect();
    for name in doomed {
        headers.remove(name);
    }
}

impl HttpUpstream {
    /// An upstream at `uri`; `tls` applies to an `https://` one.
    pub fn new(uri: Uri, tls: &crate::config::UpstreamTls) -> Result<HttpUpstream, String> {
        let https = uri.scheme_str() == Some("https");
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let host = uri.host().unwrap_or("localhost");
        let addr = format!("{host}:{port}");
        let tls = if https {
            let connect = crate::transport::upstream::tls::TlsConnect::new(tls, host)?;
            let authority = host_header(&uri)
                .and_then(|h| h.to_str().ok().map(str::to_owned))
                .unwrap_or_else(|| addr.clone());
            Some((connect, format!("https://{authority}")))
        } else {
            None
        };
        Ok(HttpUpstream {
            host: host_header(&uri),
            path: uri
                .path_and_query()
                .cloned()
                .map_or_else(|| Uri::from_static("/"), Uri::from),
            pool: Pool::new(addr, tls),
            uri,
            bridge: Default::default(),
        })
    }

    /// Sends one request with the client's end-to-end headers and waits (bounded) for the
    /// response head; the body streams afterwards.
    pub async fn send(
        &self,
        method: Method,
        headers: HeaderMap,
        body: Bytes,
        wait: Wait,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        self.send_to(self.path.clone(), method, headers, body, wait)
            .await
    }

    /// The same, to another path on the upstream's origin (its `/.well-known/` documents).
    pub async fn send_to_path(
        &self,
        path_and_query: &str,
        method: Method,
        headers: HeaderMap,
        wait: Wait,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        let path = path_and_query
            .parse::<http::uri::PathAndQuery>()
            .map(Uri::from)
            .map_err(|e| UpstreamError::Unreachable(e.to_string()))?;
        self.send_to(path, method, headers, Bytes::new(), wait)
            .await
    }

    async fn send_to(
        &self,
        path: Uri,
        method: Method,
        mut headers: HeaderMap,
        body: Bytes,
        wait: Wait,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .body(Full::new(body))
            .map_err(|e| UpstreamError::Unreachable(e.to_string()))?;
        strip_hop_by_hop(&mut headers);
        headers.remove(header::ACCEPT_ENCODING);
        match &self.host {
            Some(host) => headers.insert(header::HOST, host.clone()),
            None => headers.remove(header::HOST),
        };
        *req.headers_mut() = headers;
        let started = tokio::time::Instant::now();
        let is_get = req.method() == Method::GET;
        match tokio::time::timeout(wait.answer, self.pool.send(req)).await {
            Ok(Ok(resp)) => {
                let is_sse = resp
                    .headers()
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
                let timer = match (is_sse, is_get) {
                    (false, _) => Some(Timer::Whole(wait.answer)),
                    (true, false) => Some(Timer::Gap(wait.stream_gap)),
                    (true, true) => None,
                };
                Ok(resp.map(|inner| UpstreamBody {
                    inner,
                    timer,
                    started,
                    sleep: None,
                    restart: false,
                }))
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(UpstreamError::Timeout(wait.answer)),
        }
    }
}

/// A body read whole up to a limit. Over the limit, the bytes read so far and the rest of
/// the body come back, so the caller can still pass everything through.
pub enum Collected<B> {
    Whole(Bytes),
    TooLarge(B),
}

/// Why a request body could not be read.
#[derive(Debug)]
pub enum ReadError {
    TooLarge,
    Broken(String),
}

/// What a body has delivered so far. Most bodies arrive in one frame, which is kept as it
/// came, without a copy.
#[derive(Default)]
struct Gathered {
    first: Option<Bytes>,
    buf: bytes::BytesMut,
}

impl Gathered {
    fn push(&mut self, data: Bytes) {
        match self.first.take() {
            None if self.buf.is_empty() => self.first = Some(data),
            held => {
                if let Some(h) = held {
                    self.buf.extend_from_slice(&h);
                }
                self.buf.extend_from_slice(&data);
            }
        }
    }

    fn len(&self) -> usize {
        self.first.as_ref().map_or(self.buf.len(), Bytes::len)
    }

    fn into_bytes(mut self) -> Bytes {
        self.first.take().unwrap_or_else(|| self.buf.freeze())
    }
}

/// Reads a body until its end or until more than `limit` bytes have come; `Ok(false)`
/// means over the limit, with what was read in `got`.
///
/// It stops at the length the body declared rather than polling once more for its end: on
/// hyper's HTTP/1 server that last poll is answered by the connection task that is running
/// it, a self-wake that costs a requeue per request (and, on a work-stealing scheduler, a
/// futex wake of another thread).
async fn gather<B>(body: &mut B, limit: usize, got: &mut Gathered) -> Result<bool, B::Error>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    while !body.is_end_stream() {
        let Some(frame) = body.frame().await else {
            break;
        };
        if let Ok(data) = frame?.into_data() {
            got.push(data);
            if got.len() > limit {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Reads a request body whole, refusing more than `limit` bytes.
pub async fn read_limited<B>(mut body: B, limit: usize) -> Result<Bytes, ReadError>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    // A declared length (Content-Length) over the limit is refused before reading.
    if body.size_hint().lower() > limit as u64 {
        return Err(ReadError::TooLarge);
    }
    let mut got = Gathered::default();
    match gather(&mut body, limit, &mut got).await {
        Ok(true) => Ok(got.into_bytes()),
        Ok(false) => Err(ReadError::TooLarge),
        Err(e) => Err(ReadError::Broken(e.to_string())),
    }
}

/// Reads an upstream body whole when it fits in `limit`; otherwise hands back a body that
/// replays what was read and streams the rest.
pub async fn collect_upstream(
    mut body: UpstreamBody,
    limit: usize,
) -> Result<Collected<axum::body::Body>, BodyError> {
    let mut got = Gathered::default();
    if gather(&mut body, limit, &mut got).await? {
        return Ok(Collected::Whole(got.into_bytes()));
    }
    let head = got.into_bytes();
    let head = futures_util::stream::once(async move { Ok::<_, BodyError>(head) });
    use futures_util::StreamExt;
    Ok(Collected::TooLarge(axum::body::Body::from_stream(
        head.chain(body.into_data_stream()),
    )))
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
    let resp = up
        .send(Method::POST, headers.clone(), request, limits.into())
        .await
        .map_err(ListFailed::Unavailable)?;
    if !resp.status().is_success() {
        let (mut parts, body) = resp.into_parts();
        strip_hop_by_hop(&mut parts.headers);
        let relay = axum::response::Response::from_parts(parts, axum::body::Body::new(body));
        return Err(ListFailed::Relay(Box::new(relay)));
    }
    let (parts, mut body) = resp.into_parts();
    let is_sse = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
    let broke = |e: BodyError| {
        ListFailed::Unavailable(UpstreamError::Unreachable(format!(
            "the answer broke off: {e}"
        )))
    };
    let found = |r: Result<Box<RawValue>, String>| {
        r.map(|result| (parts.headers.clone(), result))
            .map_err(ListFailed::Refused)
    };
    if !is_sse {
        return match collect_upstream(body, limits.max_response_bytes)
            .await
            .map_err(broke)?
        {
            Collected::Whole(bytes) => guard::match_answer(&bytes, id).map_or_else(
                || {
                    Err(ListFailed::Refused(
                        "the answer is not a JSON-RPC response to the request".into(),
                    ))
                },
                found,
            ),
            Collected::TooLarge(_) => Err(ListFailed::Refused(
                "the answer is over max_response_bytes".into(),
            )),
        };
    }
    let mut splitter = Splitter::new(limits.max_sse_event_bytes);
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(broke)?.into_data() else {
            continue;
        };
        splitter.push(&data);
        while let Some(split) = splitter.next_event() {
            let Split::Event(ev) = split else {
                return Err(ListFailed::Refused(
                    "an SSE event of the answer is over max_sse_event_bytes".into(),
                ));
            };
            if let Some(r) = sse::data(&ev).and_then(|d| guard::match_answer(d.as_bytes(), id)) {
                return found(r);
            }
        }
    }
    Err(ListFailed::Unavailable(UpstreamError::Unreachable(
        "the stream ended without the answer".into(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_is_the_authority_without_a_default_port() {
        for (uri, host) in [
            ("http://127.0.0.1:8080/mcp", "127.0.0.1:8080"),
            ("http://example.com:80/mcp", "example.com"),
            ("https://example.com:443/", "example.com"),
            ("https://example.com:80/", "example.com:80"),
            ("http://[::1]:9/mcp", "[::1]:9"),
        ] {
            let got = host_header(&uri.parse().unwrap()).unwrap();
            assert_eq!(got, host, "{uri}");
        }
    }

    #[test]
    fn hop_by_hop_headers_stay_behind() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            "keep-alive, x-secret-hop".parse().unwrap(),
        );
        h.insert("x-secret-hop", "1".parse().unwrap());
        h.insert(header::TRANSFER_ENCODING, "chunked".parse().unwrap());
        h.insert("mcp-session-id", "abc".parse().unwrap());
        h.insert(header::AUTHORIZATION, "Bearer t".parse().unwrap());
        h.insert("last-event-id", "7".parse().unwrap());
        let mut out = h;
        strip_hop_by_hop(&mut out);
        let names: Vec<_> = out.keys().map(|k| k.as_str()).collect();
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(
            out.contains_key("mcp-session-id")
                && out.contains_key("authorization")
                && out.contains_key("last-event-id")
        );
    }

    /// Declares its length and delivers it in one frame, but never ends its stream: a reader
    /// that polls past the declared end waits forever.
    struct Declared(Option<Bytes>, u64);

    impl http_body::Body for Declared {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
            match self.0.take() {
                Some(d) => std::task::Poll::Ready(Some(Ok(http_body::Frame::data(d)))),
                None => std::task::Poll::Pending,
            }
        }
        fn is_end_stream(&self) -> bool {
            self.0.is_none()
        }
        fn size_hint(&self) -> http_body::SizeHint {
            http_body::SizeHint::with_exact(self.1)
        }
    }

    fn chunks(
        parts: Vec<Result<&'static str, &'static str>>,
    ) -> http_body_util::StreamBody<
        impl futures_util::Stream<Item = Result<http_body::Frame<Bytes>, &'static str>> + Unpin,
    > {
        http_body_util::StreamBody::new(futures_util::stream::iter(
            parts
                .into_iter()
                .map(|p| p.map(|s| http_body::Frame::data(Bytes::from_static(s.as_bytes())))),
        ))
    }

    #[tokio::test]
    async fn a_body_is_read_up_to_its_declared_end_and_no_further() {
        let body = Declared(Some(Bytes::from_static(b"{\"id\":1}")), 8);
        let read = tokio::time::timeout(Duration::from_secs(5), read_limited(body, 100)).await;
        assert_eq!(read.expect("no poll past the end").unwrap(), "{\"id\":1}");
    }

    #[tokio::test]
    async fn chunked_bodies_are_joined_and_limited() {
        let whole = read_limited(chunks(vec![Ok("ab"), Ok("cd"), Ok("e")]), 5).await;
        assert_eq!(whole.unwrap(), "abcde");
        let over = read_limited(chunks(vec![Ok("abc"), Ok("def")]), 5).await;
        assert!(matches!(over, Err(ReadError::TooLarge)));
        let declared_over = read_limited(Declared(Some(Bytes::from_static(b"x")), 6), 5).await;
        assert!(matches!(declared_over, Err(ReadError::TooLarge)));
        let broken = read_limited(chunks(vec![Ok("ab"), Err("reset")]), 5).await;
        assert!(matches!(broken, Err(ReadError::Broken(e)) if e == "reset"));
    }
}
