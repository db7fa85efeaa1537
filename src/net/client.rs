//! An HTTP client of one endpoint: kept connections ([`super::pool`]), header hygiene, and
//! deadlines on the answer's head and body.
//!
//! End-to-end headers (`Mcp-Session-Id`, `MCP-Protocol-Version`, `Last-Event-ID`,
//! `Authorization`, `Mcp-Param-*`, and any other) pass both ways; hop-by-hop headers and the
//! ones named in `Connection` do not. `Accept-Encoding` is dropped on the way up so that
//! answers toolgate may need to read arrive uncompressed.

use super::pool::{Pool, WireBody};
use super::proxy::{ProxyError, Route};
use super::tls::TlsError;
use crate::error::UpstreamError;
use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::future::Either;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, Uri};

use http_body_util::Full;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// An application's own MCP service, called in process ([`crate::ValidateLayer`]): the
/// server behind the edge when toolgate is a layer in that application.
pub(crate) type AppService = Arc<
    dyn Fn(
            http::Request<axum::body::Body>,
        ) -> Pin<Box<dyn Future<Output = Response<axum::body::Body>> + Send>>
        + Send
        + Sync,
>;

/// Why a client cannot be made: its TLS settings, or the proxy the environment names.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Proxy(#[from] ProxyError),
}

/// How a request reaches the endpoint: over the network (kept connections), or as a call
/// of the application's own service, in process. One per upstream, so its size is nothing;
/// boxing the pool would add a pointer to follow on every request.
#[allow(clippy::large_enum_variant)]
enum Transport {
    Wire(Pool),
    App(AppService),
}

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

/// What a request asked, for the reading of its answer's head.
#[derive(Clone, Copy)]
struct Asked {
    /// A GET: a session's stream, bounded by no timer once its head is in.
    is_get: bool,
    /// For the MCP endpoint, whose redirection toolgate does not follow (a document
    /// elsewhere on the server's origin is relayed as it comes, redirection or not).
    endpoint: bool,
}

/// An upstream's response body, under the [`Wait`] in force when it was asked for. An
/// upstream that sends its head and then stalls fails the body with [`BodyError::Stalled`],
/// which every reader already turns into an answer for the client.
///
/// The timer is made only when the body first has to wait: an answer that arrives with its
/// head (the common case) costs no allocation and no timer registration.
pub struct UpstreamBody {
    inner: Inner,
    timer: Option<Timer>,
    started: tokio::time::Instant,
    sleep: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    /// A frame came since the timer was last set (gap timers only).
    restart: bool,
    /// What the answer's head said its body is, read once where the head arrived.
    media: Media,
}

impl UpstreamBody {
    /// What the answer's `Content-Type` names (see [`Media`]).
    pub(crate) fn media(&self) -> Media {
        self.media
    }

    /// Whether the body, read whole, is as long as the answer's `Content-Length` says when
    /// it has one: hyper holds a body from the network to its declared length (a shorter
    /// one fails, a longer one is cut there). An application's body, in process, is held to
    /// nothing.
    pub(crate) fn held_to_its_length(&self) -> bool {
        matches!(self.inner, Inner::Wire(_))
    }
}

/// What a message's `Content-Type` names, as far as the rules tell answers apart. Read once
/// for an upstream's answer, where its head arrives; its deadline, the answer rules and a
/// listing's exchange all go by that reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Media {
    Json,
    EventStream,
    Other,
}

impl Media {
    pub(crate) fn of(headers: &HeaderMap) -> Media {
        let value = headers.get(header::CONTENT_TYPE);
        // Compared whole first: nearly every JSON answer's type is written so, and then
        // its text is neither checked nor cut nor folded.
        if value.is_some_and(|v| v.as_bytes() == b"application/json") {
            return Media::Json;
        }
        let media = value.map_or("", media_type_of);
        if media.eq_ignore_ascii_case("application/json") {
            Media::Json
        } else if names_event_stream(media) {
            Media::EventStream
        } else {
            Media::Other
        }
    }
}

/// The body as the transport gives it. The application's is behind a mutex only to be
/// `Sync` like the network's (readers hold the answer across awaits); it is polled through
/// `get_mut`, never locked.
enum Inner {
    Wire(WireBody),
    App(std::sync::Mutex<axum::body::Body>),
}

impl Inner {
    fn poll_frame(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, BodyError>>> {
        use http_body::Body;
        match self {
            Inner::Wire(b) => std::pin::Pin::new(b)
                .poll_frame(cx)
                .map(|f| f.map(|f| f.map_err(BodyError::from))),
            Inner::App(b) => std::pin::Pin::new(b.get_mut().unwrap_or_else(|e| e.into_inner()))
                .poll_frame(cx)
                .map(|f| f.map(|f| f.map_err(BodyError::App))),
        }
    }
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
    /// The application's own service failed its body (in process).
    #[error("{0}")]
    App(axum::Error),
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
        if let Poll::Ready(frame) = this.inner.poll_frame(cx) {
            this.restart = true;
            return Poll::Ready(frame);
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
        match &self.inner {
            Inner::Wire(b) => b.is_end_stream(),
            Inner::App(b) => crate::locks::MutexExt::locked(b).is_end_stream(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match &self.inner {
            Inner::Wire(b) => b.size_hint(),
            Inner::App(b) => crate::locks::MutexExt::locked(b).size_hint(),
        }
    }
}

/// One HTTP endpoint, over its kept connections. The wait for an answer is the caller's: the
/// gateway passes the one in force, so a reload changes it for the next request.
pub struct HttpClient {
    pub uri: Uri,
    /// The endpoint's path, as a request line carries it.
    path: Uri,
    transport: Transport,
    /// The `Host` every request carries, built once.
    host: Option<HeaderValue>,
    /// The proxy's credentials, which a plain server's requests sent to the proxy carry.
    proxy_authorization: Option<HeaderValue>,
}

/// `path` (origin-form) as the absolute target a request sent to a proxy carries: `uri`'s
/// scheme and host before it (never user info, which a target does not carry).
fn absolute(uri: &Uri, path: &Uri) -> Uri {
    let mut parts = http::uri::Parts::default();
    parts.scheme = uri.scheme().cloned();
    parts.authority = uri
        .authority()
        .and_then(|a| a.as_str().rsplit('@').next()?.parse().ok());
    parts.path_and_query = path.path_and_query().cloned();
    Uri::from_parts(parts).unwrap_or_else(|_| path.clone())
}

/// A 407 is a proxy's word, never a server's: a proxy on the way asked for credentials
/// toolgate did not give. Passed on, it would tell the client that its own proxy wants them.
#[cold]
fn proxy_wants_credentials() -> UpstreamError {
    UpstreamError::Unreachable(format!(
        "a proxy on the way refused the request: 407 Proxy Authentication Required{}",
        super::proxy::CREDENTIALS_HINT
    ))
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

/// A message's media type, without its parameters (`""` when it names none). Cut and
/// trimmed as bytes: a header's text is ASCII, and `str`'s pattern search and Unicode trim
/// cost several times more on every answer.
pub(crate) fn media_type(headers: &HeaderMap) -> &str {
    headers.get(header::CONTENT_TYPE).map_or("", media_type_of)
}

/// [`media_type`] of a `Content-Type`'s value.
fn media_type_of(value: &HeaderValue) -> &str {
    let Ok(v) = value.to_str() else {
        return "";
    };
    let end = v.bytes().position(|b| b == b';').unwrap_or(v.len());
    v[..end].trim_ascii()
}

/// Whether a message's body is an event stream, for the answers the stdio front writes out.
/// An upstream's answer is read once, where its head arrives, as [`Media`].
pub(crate) fn is_event_stream(headers: &HeaderMap) -> bool {
    names_event_stream(media_type(headers))
}

/// Whether a media type (as [`media_type`] reads it) is an event stream's; a media type's
/// case does not count.
pub(crate) fn names_event_stream(media: &str) -> bool {
    media.eq_ignore_ascii_case("text/event-stream")
}

/// Whether a header belongs to one hop (RFC 9110 section 7.6.1, and the common
/// `Proxy-Connection`). Compared as names, not as text: a standard name's text comes from a
/// table in `http` that a message's headers would otherwise read a line of each, and a
/// standard name compares with another by its tag alone.
fn hop_by_hop(name: &HeaderName) -> bool {
    static HOP_BY_HOP: [HeaderName; 9] = [
        header::CONNECTION,
        header::PROXY_AUTHENTICATE,
        header::PROXY_AUTHORIZATION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        HeaderName::from_static("keep-alive"),
        HeaderName::from_static("proxy-connection"),
    ];
    HOP_BY_HOP.contains(name)
}

/// Removes the headers that belong to one hop (and the ones `Connection` names), in place:
/// what is left is the end-to-end exchange. A `Content-Length` stays, but beside a transfer
/// coding, where it is not the length of the body that comes out of the coding. (`Host`
/// names the request's target: `send_to` sets the upstream's.)
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Nearly every message carries no header of the kind: one pass over the names says so.
    if !headers.keys().any(hop_by_hop) {
        return;
    }
    if headers.contains_key(header::TRANSFER_ENCODING) {
        headers.remove(header::CONTENT_LENGTH);
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

/// Keeps a `Content-Length` only when it is `len`, the length of the body sent with it: a
/// rule may have rewritten the body, and a request toolgate sends with a client's headers
/// carries another body. Without one, hyper writes the body's own. A length kept spares
/// hyper writing (and allocating) it again. Every message sent whole, either way, goes
/// through it.
pub(crate) fn fit_length(headers: &mut HeaderMap, len: usize) {
    // (hyper's reader keeps one of several alike lengths and refuses lengths that differ,
    // so the first is the one.)
    if !headers
        .get(header::CONTENT_LENGTH)
        .is_some_and(|v| is_length(v, len))
    {
        headers.remove(header::CONTENT_LENGTH);
    }
}

/// Whether a `Content-Length` says `len`. Read as digits in place: a text check and a
/// general parse cost more than the rest.
fn is_length(value: &HeaderValue, len: usize) -> bool {
    let digits = value.as_bytes();
    // At most 19 digits: no such number overflows the sum.
    (1..=19).contains(&digits.len())
        && digits.iter().all(u8::is_ascii_digit)
        && digits
            .iter()
            .fold(0u64, |n, d| n * 10 + u64::from(d - b'0'))
            == len as u64
}

/// Makes a client's headers those of a request to the upstream at `host` with a body of
/// `len` bytes: no header of one hop ([`strip_hop_by_hop`]), no `Accept-Encoding` (toolgate
/// reads answers as they come), the upstream's `Host` (none when it has no name), a
/// `Content-Length` only when it is `len` ([`fit_length`]).
///
/// Why one pass: each of those, done by name, hashed the name and probed the map, about
/// 0.5k instructions a request in all. A pass over the names finds what must change, and
/// in the common request only the `Host` does, its value replaced where it lies.
fn to_upstream(headers: &mut HeaderMap, host: Option<&HeaderValue>, len: usize) {
    let (mut hosts, mut fits, mut one_hop) = (0, None, false);
    for (name, value) in headers.iter_mut() {
        if name == header::HOST {
            hosts += 1;
            if let Some(host) = host {
                value.clone_from(host);
            }
        } else if name == header::CONTENT_LENGTH {
            fits.get_or_insert_with(|| is_length(value, len));
        } else if name == header::ACCEPT_ENCODING || hop_by_hop(name) {
            one_hop = true;
        }
    }
    if one_hop {
        strip_hop_by_hop(headers);
        headers.remove(header::ACCEPT_ENCODING);
    }
    if fits == Some(false) {
        headers.remove(header::CONTENT_LENGTH);
    }
    match host {
        Some(host) if hosts != 1 => drop(headers.insert(header::HOST, host.clone())),
        None if hosts > 0 => drop(headers.remove(header::HOST)),
        _ => {}
    }
}

impl HttpClient {
    /// A client of `uri`; `tls` applies to an `https://` one. Its connections go through the
    /// proxy the environment names for it ([`super::proxy`]).
    pub fn new(uri: Uri, tls: &crate::config::UpstreamTls) -> Result<HttpClient, ClientError> {
        let super::Server { https, host, port } = super::Server::of(&uri);
        let addr = format!("{host}:{port}");
        let tls = if https {
            let connect = super::tls::TlsConnect::new(tls, host)?;
            let authority = host_header(&uri)
                .and_then(|h| h.to_str().ok().map(str::to_owned))
                .unwrap_or_else(|| addr.clone());
            Some((connect, format!("https://{authority}")))
        } else {
            None
        };
        let route = Route::from_env(https, host, port)?;
        if let Some(p) = route.proxy() {
            tracing::info!(server = %addr, proxy = %p, "connecting through a proxy");
        }
        let path = uri
            .path_and_query()
            .cloned()
            .map_or_else(|| Uri::from_static("/"), Uri::from);
        let (path, proxy_authorization) = match &route {
            Route::Forward(proxy) => (absolute(&uri, &path), proxy.authorization()),
            _ => (path, None),
        };
        Ok(HttpClient {
            host: host_header(&uri),
            path,
            transport: Transport::Wire(Pool::new(addr, tls).through(route)),
            uri,
            proxy_authorization,
        })
    }

    /// The application's own service as the endpoint, its MCP endpoint at `uri`'s path
    /// (where toolgate's own requests go; a forwarded request keeps the target it named).
    pub(crate) fn in_process(uri: Uri, app: AppService) -> HttpClient {
        HttpClient {
            host: None,
            path: uri
                .path_and_query()
                .cloned()
                .map_or_else(|| Uri::from_static("/mcp"), Uri::from),
            transport: Transport::App(app),
            uri,
            proxy_authorization: None,
        }
    }

    /// Forwards a client's request (its head `parts`, with `body`): over the network with its
    /// method and end-to-end headers; to an application in process as it came, with the
    /// target it named and its extensions (what the application's own layers put there).
    ///
    /// Like [`Self::send`], the future of the transport's own send, not a level awaiting it.
    pub fn send_as(
        &self,
        parts: Box<http::request::Parts>,
        body: Bytes,
        wait: Wait,
    ) -> impl Future<Output = Result<Response<UpstreamBody>, UpstreamError>> + '_ {
        match &self.transport {
            Transport::Wire(_) => {
                let http::request::Parts {
                    method, headers, ..
                } = *parts;
                let path = self.path.clone();
                Either::Left(self.send_to(path, method, headers, body, wait, true))
            }
            Transport::App(app) => {
                let mut parts = *parts;
                strip_hop_by_hop(&mut parts.headers);
                fit_length(&mut parts.headers, body.len());
                let req = http::Request::from_parts(parts, axum::body::Body::from(body));
                Either::Right(Self::app_answer(app, req, false, true, wait))
            }
        }
    }

    /// Sends one request with the client's end-to-end headers and waits (bounded) for the
    /// response head; the body streams afterwards. [`Self::send_to`]'s own future: a level
    /// awaiting it would hold the request's parts twice.
    pub fn send(
        &self,
        method: Method,
        headers: HeaderMap,
        body: Bytes,
        wait: Wait,
    ) -> impl Future<Output = Result<Response<UpstreamBody>, UpstreamError>> + '_ {
        self.send_to(self.path.clone(), method, headers, body, wait, true)
    }

    /// A request's stream that its server ended before the answer, asked for again (a GET
    /// with the request's headers and `Last-Event-ID`, SEP-1699). What comes back is bounded
    /// as the request's own stream was, not as a session's stream is: it is that answer's.
    pub fn resume(
        &self,
        headers: HeaderMap,
        wait: Wait,
    ) -> impl Future<Output = Result<Response<UpstreamBody>, UpstreamError>> + '_ {
        let sent = self.send(Method::GET, headers, Bytes::new(), wait);
        sent.map(move |answered| {
            let mut resp = answered?;
            let body = resp.body_mut();
            if body.media == Media::EventStream {
                body.timer = Some(Timer::Gap(wait.stream_gap));
            }
            Ok(resp)
        })
    }

    /// The same, to another path on the upstream's origin (its `/.well-known/` documents, the
    /// endpoint an HTTP+SSE server names for messages).
    pub async fn send_to_path(
        &self,
        path_and_query: &str,
        method: Method,
        (headers, body): (HeaderMap, Bytes),
        wait: Wait,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        let path = path_and_query
            .parse::<http::uri::PathAndQuery>()
            .map(Uri::from)
            .map_err(|e| UpstreamError::Unreachable(e.to_string()))?;
        // Sent to a proxy, a request names the server as the endpoint's path does.
        let path = match self.path.authority() {
            Some(_) => absolute(&self.uri, &path),
            None => path,
        };
        self.send_to(path, method, headers, body, wait, false).await
    }

    /// The request made here, and only its sending awaited: an `async fn` would keep what
    /// it was given beside the request made of it, for as long as the answer takes.
    fn send_to(
        &self,
        path: Uri,
        method: Method,
        mut headers: HeaderMap,
        body: Bytes,
        wait: Wait,
        endpoint: bool,
    ) -> impl Future<Output = Result<Response<UpstreamBody>, UpstreamError>> + '_ {
        let is_get = method == Method::GET;
        let pool = match &self.transport {
            Transport::Wire(pool) => pool,
            Transport::App(app) => {
                strip_hop_by_hop(&mut headers);
                fit_length(&mut headers, body.len());
                let mut req = http::Request::new(axum::body::Body::from(body));
                (*req.method_mut(), *req.uri_mut(), *req.headers_mut()) = (method, path, headers);
                return Either::Right(Self::app_answer(app, req, is_get, endpoint, wait));
            }
        };
        to_upstream(&mut headers, self.host.as_ref(), body.len());
        if let Some(credentials) = &self.proxy_authorization {
            headers.insert(header::PROXY_AUTHORIZATION, credentials.clone());
        }
        let mut req = Request::new(Full::new(body));
        (*req.method_mut(), *req.uri_mut(), *req.headers_mut()) = (method, path, headers);
        // One reading of the clock for the head's deadline and the body's.
        let started = tokio::time::Instant::now();
        let answer = pool.send(req, started, wait.answer);
        let asked = Asked { is_get, endpoint };
        Either::Left(Self::answered(answer, Inner::Wire, started, asked, wait))
    }

    /// An application's answer to `req`, in process, bounded as the network's are.
    fn app_answer(
        app: &AppService,
        req: http::Request<axum::body::Body>,
        is_get: bool,
        endpoint: bool,
        wait: Wait,
    ) -> impl Future<Output = Result<Response<UpstreamBody>, UpstreamError>> + use<> {
        let started = tokio::time::Instant::now();
        let answer = tokio::time::timeout_at(started + wait.answer, app(req)).map(move |answer| {
            let resp = answer.map_err(|_| UpstreamError::Timeout(wait.answer))?;
            Ok(resp.map(|b| Inner::App(std::sync::Mutex::new(b))))
        });
        let asked = Asked { is_get, endpoint };
        Self::answered(answer, std::convert::identity, started, asked, wait)
    }

    /// An answer's head, already bounded by `started` + `wait.answer`, with its body (made
    /// an [`Inner`] by `inner`) bounded as [`Wait`] says.
    ///
    /// A map rather than an `async fn`: one awaiting `answer` would hold it twice (as its
    /// argument, and as awaited), and every request's future above it would carry and copy
    /// both. The body is made an `Inner` in the same map, not in one of its own: each map
    /// is a level every poll of the request goes through.
    fn answered<F, B>(
        answer: F,
        inner: fn(B) -> Inner,
        started: tokio::time::Instant,
        asked: Asked,
        wait: Wait,
    ) -> impl Future<Output = Result<Response<UpstreamBody>, UpstreamError>>
    where
        F: Future<Output = Result<Response<B>, UpstreamError>>,
    {
        answer.map(move |answered| {
            let resp = answered?;
            let status = resp.status();
            if status == http::StatusCode::PROXY_AUTHENTICATION_REQUIRED {
                return Err(proxy_wants_credentials());
            }
            if asked.endpoint && status.is_redirection() {
                let to = resp.headers().get(header::LOCATION);
                return Err(UpstreamError::moved(
                    status,
                    to.and_then(|v| v.to_str().ok()),
                ));
            }
            let media = Media::of(resp.headers());
            let timer = match (media == Media::EventStream, asked.is_get) {
                (false, _) => Some(Timer::Whole(wait.answer)),
                (true, false) => Some(Timer::Gap(wait.stream_gap)),
                (true, true) => None,
            };
            Ok(resp.map(|body| UpstreamBody {
                inner: inner(body),
                timer,
                started,
                sleep: None,
                restart: false,
                media,
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_to_a_proxy_names_the_server_in_full() {
        for (uri, path, target) in [
            (
                "http://mcp.corp.test:8080/mcp",
                "/mcp",
                "http://mcp.corp.test:8080/mcp",
            ),
            (
                "http://mcp.corp.test/",
                "/.well-known/x?a=1",
                "http://mcp.corp.test/.well-known/x?a=1",
            ),
            ("http://u:pw@[::1]:9/mcp", "/mcp", "http://[::1]:9/mcp"),
        ] {
            let got = absolute(&uri.parse().unwrap(), &path.parse().unwrap());
            assert_eq!(got, target, "{uri}");
        }
    }

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
    fn a_length_goes_on_only_as_the_bodys_own() {
        let length = |h: &HeaderMap| h.get(header::CONTENT_LENGTH).cloned();
        let mut h = HeaderMap::new();
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(5));
        strip_hop_by_hop(&mut h);
        fit_length(&mut h, 5);
        assert_eq!(length(&h), Some(HeaderValue::from(5)));
        fit_length(&mut h, 7);
        assert_eq!(length(&h), None);
        for odd in ["", "+5", "5 ", "05x", "99999999999999999999"] {
            h.insert(header::CONTENT_LENGTH, HeaderValue::from_static(odd));
            fit_length(&mut h, 5);
            assert_eq!(length(&h), None, "{odd:?}");
        }
        // Beside a transfer coding a length is not the body's.
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(5));
        h.insert(header::TRANSFER_ENCODING, "chunked".parse().unwrap());
        strip_hop_by_hop(&mut h);
        assert!(h.is_empty(), "{h:?}");
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

    /// A client's headers as they go upstream, from the common request (only the `Host`
    /// changes) to one with everything to change.
    #[test]
    fn a_request_to_the_upstream_carries_its_own_host_and_length() {
        let host = HeaderValue::from_static("upstream:8080");
        let headers = |pairs: &[(&str, &str)]| {
            let mut h = HeaderMap::new();
            for (k, v) in pairs {
                h.append(HeaderName::try_from(*k).unwrap(), v.parse().unwrap());
            }
            h
        };
        let common = [
            ("host", "toolgate:1"),
            ("content-type", "application/json"),
            ("content-length", "5"),
        ];
        let mut h = headers(&common);
        to_upstream(&mut h, Some(&host), 5);
        let expected = headers(&[
            ("host", "upstream:8080"),
            ("content-type", "application/json"),
            ("content-length", "5"),
        ]);
        assert_eq!(h, expected);
        let mut h = headers(&common);
        to_upstream(&mut h, None, 7);
        assert_eq!(h, headers(&[("content-type", "application/json")]));
        let mut h = headers(&[
            ("host", "a"),
            ("host", "b"),
            ("accept-encoding", "gzip"),
            ("connection", "x-hop"),
            ("x-hop", "1"),
            ("content-length", "9"),
            ("content-length", "5"),
            ("x-kept", "1"),
        ]);
        to_upstream(&mut h, Some(&host), 5);
        assert_eq!(h, headers(&[("host", "upstream:8080"), ("x-kept", "1")]));
        let mut h = headers(&[("x-kept", "1")]);
        to_upstream(&mut h, Some(&host), 0);
        assert_eq!(h, headers(&[("x-kept", "1"), ("host", "upstream:8080")]));
    }

    #[test]
    fn a_media_type_is_read_without_its_parameters() {
        let headers = |value: &[u8]| {
            let mut headers = HeaderMap::new();
            let value = HeaderValue::from_bytes(value).unwrap();
            headers.insert(header::CONTENT_TYPE, value);
            headers
        };
        for (value, media, stream) in [
            (&b"application/json"[..], "application/json", false),
            (
                b" text/event-stream ; charset=utf-8",
                "text/event-stream",
                true,
            ),
            (b"Text/Event-Stream", "Text/Event-Stream", true),
            (b"text/event-streams", "text/event-streams", false),
            (b"\tapplication/json;", "application/json", false),
            (b"", "", false),
            (b";charset=utf-8", "", false),
            // Not text: no media type is read from it.
            (b"text/event-stream; x=\xff", "", false),
        ] {
            let h = headers(value);
            assert_eq!(
                (media_type(&h), is_event_stream(&h)),
                (media, stream),
                "{value:?}"
            );
            assert_eq!(Media::of(&h) == Media::EventStream, stream, "{value:?}");
        }
        assert_eq!(media_type(&HeaderMap::new()), "");
        assert_eq!(Media::of(&HeaderMap::new()), Media::Other);
        for json in [&b"application/json"[..], b"Application/JSON; charset=utf-8"] {
            assert_eq!(Media::of(&headers(json)), Media::Json, "{json:?}");
        }
    }

    #[test]
    fn every_hop_by_hop_name_is_known_as_it_is_read_off_the_wire() {
        let names = [
            "Connection",
            "Keep-Alive",
            "Proxy-Authenticate",
            "Proxy-Authorization",
            "TE",
            "Trailer",
            "Transfer-Encoding",
            "Upgrade",
            "Proxy-Connection",
        ];
        for name in names {
            let read = HeaderName::from_bytes(name.as_bytes()).unwrap();
            assert!(hop_by_hop(&read), "{name}");
        }
        for name in [
            "Content-Length",
            "Keep",
            "Proxy-Connections",
            "X-Request-Id",
        ] {
            let read = HeaderName::from_bytes(name.as_bytes()).unwrap();
            assert!(!hop_by_hop(&read), "{name}");
        }
    }
}
