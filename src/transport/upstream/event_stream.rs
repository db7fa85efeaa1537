//! A server of the HTTP+SSE transport of 2024-11-05, which Streamable HTTP replaced: a GET
//! opens an event stream whose first event (`endpoint`) names where the client posts its
//! messages, and every message of the server comes on that stream. One stream is one session.
//!
//! Such a server is a pipe of messages both ways, as a stdio server is, so it is served as
//! one: each stream stands in for a child process ([`super::child::ChildProcess::connect`]),
//! its messages written as the lines a child's stdout would carry. Everything a child has
//! (a session per child, the shared child, answers by id, questions, cancellation, the
//! handshake and era rules) is then the same for it.
//!
//! Caveats: a session's GET and every POST go with the credential of the client that opened
//! it, as its messages would to a Streamable HTTP server (or toolgate's own for the server,
//! `upstream_header`, in its place); a session shared by clients without one goes with
//! toolgate's own only. A stream that ends ends its session, as a child's exit
//! does (the transport has no resumption), and so does a message the server refuses to take
//! (a POST not answered 2xx), an event over `limits.max_sse_event_bytes` (past it, the stream
//! cannot be read on), or no endpoint named in time: what waits on the session is told why.
//! An endpoint is taken on the stream's own origin only, as the TypeScript SDK's client takes
//! one: the posts carry toolgate's credential.

use crate::config::{Limits, UpstreamTls};
use crate::error::UpstreamError;
use crate::net::client::{ClientError, HttpClient, Media, UpstreamBody};
use crate::transport::sse;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use http::{Method, Uri};
use std::sync::{Arc, OnceLock};
use tokio::io::{AsyncWriteExt, DuplexStream};

/// The longest a server has to name its endpoint once its stream is open; servers name it
/// at once.
const ENDPOINT_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// How much of the server's messages may wait, as lines, for the reader of its "output".
const PIPE_BYTES: usize = 64 * 1024;

/// One HTTP+SSE server: where its event stream is.
pub struct EventStreamServer {
    http: HttpClient,
}

/// What one session's requests carry and are held to, as the gateway in force when it
/// opens says: the credential its requests go with (`auth::carried`), and the limits.
pub(crate) struct Terms {
    pub(crate) credentials: HeaderMap,
    pub(crate) limits: Limits,
}

/// One session's stream, as a child's pipes: what toolgate writes goes to `to_server`, what
/// the server sends comes out of `output` as lines.
pub(crate) struct Stream {
    pub(crate) to_server: super::input::Input,
    pub(crate) output: DuplexStream,
    pub(crate) running: Running,
}

/// The task that holds a session's stream, as the child that stands for the session holds
/// it: the stream is closed when it is dropped, as a child's process is killed.
pub(crate) struct Running {
    server: Arc<EventStreamServer>,
    task: tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    abort: tokio::task::AbortHandle,
    ended: Arc<OnceLock<String>>,
}

impl Running {
    /// Where the server's stream is.
    pub(crate) fn uri(&self) -> &Uri {
        &self.server.http.uri
    }

    /// How the session ended, once it has.
    pub(crate) fn ended(&self) -> Option<&String> {
        self.ended.get()
    }

    /// Closes the stream at once.
    pub(crate) fn abort(&self) {
        self.abort.abort();
    }

    /// Closes the stream once what was written to it is posted (its writer gone, the task
    /// ends after the last), waiting at most `grace`, as a child gets its grace after its
    /// stdin closes.
    pub(crate) async fn close(&self, grace: std::time::Duration) {
        if let Some(task) = self.task.lock().await.take()
            && tokio::time::timeout(grace, task).await.is_err()
        {
            self.abort();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.abort();
    }
}

impl EventStreamServer {
    /// The server whose event stream is at `uri`, reached with `tls` (an `https://` one).
    pub fn new(uri: Uri, tls: &UpstreamTls) -> Result<EventStreamServer, ClientError> {
        Ok(EventStreamServer {
            http: HttpClient::new(uri, tls)?,
        })
    }

    /// How logs name it: its host and port (its URL may carry a secret in its query).
    pub fn label(&self) -> String {
        self.http.uri.authority().map_or_else(String::new, |a| {
            a.as_str().rsplit('@').next().unwrap_or("").to_string()
        })
    }

    /// Opens one session: the stream, read and written by a task of its own until the server
    /// ends it or toolgate lets it go.
    pub(crate) fn open(self: &Arc<Self>, terms: Terms) -> Stream {
        let (to_server, outgoing) = super::input::input();
        let (output, pipe) = tokio::io::duplex(PIPE_BYTES);
        let ended = Arc::new(OnceLock::new());
        let (me, why) = (self.clone(), ended.clone());
        let task = tokio::spawn(async move {
            let (mut pipe, mut outgoing) = (pipe, outgoing);
            let how = me.session(&terms, &mut outgoing, &mut pipe).await;
            // Said before the pipe and the way in close: a message refused or let go then
            // asks how the stream ended.
            let _ = why.set(how);
            drop(outgoing);
        });
        Stream {
            to_server,
            output,
            running: Running {
                server: self.clone(),
                abort: task.abort_handle(),
                task: tokio::sync::Mutex::new(Some(task)),
                ended,
            },
        }
    }

    /// The session's life: the stream opened, its endpoint learned, then messages posted
    /// and events read until either ends. Returns how it ended.
    async fn session(
        &self,
        terms: &Terms,
        outgoing: &mut super::input::Lines,
        pipe: &mut DuplexStream,
    ) -> String {
        let limits = &terms.limits;
        let resp = match (self.http)
            .send(
                Method::GET,
                terms.headers("text/event-stream"),
                Bytes::new(),
                limits.into(),
            )
            .await
        {
            Ok(resp) => resp,
            Err(UpstreamError::Unreachable(why)) => {
                return format!("could not be reached for its event stream: {why}");
            }
            Err(e) => return format!("could not open its event stream: {e}"),
        };
        if !resp.status().is_success() {
            return format!("refused its event stream: HTTP {}", resp.status().as_u16());
        }
        if resp.body().media() != Media::EventStream {
            return "answered its event stream's URL with no event stream".into();
        }
        let mut events = Events::new(resp.into_body(), limits.max_sse_event_bytes);
        // Every message waits for it, and each is bounded by `upstream_timeout`: the session
        // gives up first, so that they hear why.
        let wait = (limits.upstream_timeout / 2).min(ENDPOINT_WAIT);
        let endpoint = match tokio::time::timeout(wait, events.endpoint(&self.http.uri)).await {
            Ok(Ok(endpoint)) => endpoint,
            Ok(Err(why)) => return why.to_string(),
            Err(_) => return format!("named no endpoint within {wait:?}"),
        };
        let reading = async {
            loop {
                let line = match events.next().await {
                    Ok(Some(message)) => message,
                    Ok(None) => return "closed its event stream".to_string(),
                    Err(why) => return why.to_string(),
                };
                if pipe.write_all(&line).await.is_err() {
                    return "was let go".into();
                }
            }
        };
        tokio::select! {
            how = reading => how,
            how = self.post_each(terms, endpoint, outgoing) => how,
        }
    }

    /// Posts each message, in order, to the session's `endpoint`, until toolgate lets the
    /// session go or the server refuses one: a server that takes no more messages (its
    /// session gone, or itself) ends the session, and what waits on it is told why.
    async fn post_each(
        &self,
        terms: &Terms,
        endpoint: String,
        outgoing: &mut super::input::Lines,
    ) -> String {
        while let Some(message) = outgoing.recv().await {
            let mut headers = terms.headers("application/json, text/event-stream");
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            let sent = (self.http).send_to_path(
                &endpoint,
                Method::POST,
                (headers, message),
                (&terms.limits).into(),
            );
            match sent.await {
                Ok(resp) if resp.status().is_success() => {}
                Ok(resp) => {
                    return format!("refused a message with HTTP {}", resp.status().as_u16());
                }
                Err(UpstreamError::Unreachable(why)) => {
                    return format!("could not be reached for a message: {why}");
                }
                Err(e) => return format!("did not take a message: {e}"),
            }
        }
        "was let go".into()
    }
}

impl Terms {
    fn headers(&self, accept: &'static str) -> HeaderMap {
        let mut headers = self.credentials.clone();
        headers.insert(ACCEPT, HeaderValue::from_static(accept));
        headers
    }
}

/// A session's events, read one at a time.
struct Events(sse::Events<UpstreamBody>);

impl Events {
    fn new(body: UpstreamBody, max_event: usize) -> Events {
        Events(sse::Events::new(body, max_event))
    }

    /// The next event, whole; `Ok(None)` at the stream's end.
    async fn event(&mut self) -> Result<Option<Bytes>, Unreadable> {
        self.0.next().await.map_err(|end| match end {
            sse::Read::Broke(e) => Unreadable::Broke(e.to_string()),
            _ => Unreadable::EventTooLarge,
        })
    }

    /// The path (and query) the first `endpoint` event names, on the stream's own origin:
    /// messages posted elsewhere would take toolgate's credential to another server.
    async fn endpoint(&mut self, stream: &Uri) -> Result<String, Unreadable> {
        loop {
            let Some(event) = self.event().await? else {
                return Err(Unreadable::NoEndpoint);
            };
            if sse::name(&event) != "endpoint" {
                continue;
            }
            let data = sse::data(&event).unwrap_or_default();
            return same_origin(stream, data.trim()).ok_or(Unreadable::ForeignEndpoint);
        }
    }

    /// The data of the next `message` event, as one line; `Ok(None)` at the stream's end.
    async fn next(&mut self) -> Result<Option<Bytes>, Unreadable> {
        loop {
            let Some(event) = self.event().await? else {
                return Ok(None);
            };
            if sse::name(&event) != "message" {
                continue;
            }
            let Some(data) = sse::data(&event).filter(|d| !d.trim().is_empty()) else {
                continue;
            };
            // A message's line breaks can only be whitespace between its tokens: JSON
            // strings hold none.
            let mut line = data.replace(['\n', '\r'], " ");
            line.push('\n');
            return Ok(Some(Bytes::from(line)));
        }
    }
}

/// Why a session's stream cannot be read on, said as how its session ended.
#[derive(Debug, thiserror::Error)]
enum Unreadable {
    #[error("broke its event stream: {0}")]
    Broke(String),
    #[error("sent an event over limits.max_sse_event_bytes")]
    EventTooLarge,
    #[error("closed its event stream before naming its endpoint")]
    NoEndpoint,
    #[error("named an endpoint that is not on its own origin")]
    ForeignEndpoint,
}

/// `endpoint` (a path, or a URL) as a path and query on `stream`'s origin; `None` when it
/// names another origin.
fn same_origin(stream: &Uri, endpoint: &str) -> Option<String> {
    if endpoint.starts_with("//") {
        // Another host, the stream's scheme.
        return None;
    }
    if endpoint.starts_with('/') {
        return Some(endpoint.to_string());
    }
    if !endpoint.contains("://") {
        // Relative to the stream's own path.
        let base = stream.path();
        let dir = &base[..base.rfind('/').map_or(0, |i| i + 1)];
        return Some(format!("{dir}{endpoint}"));
    }
    let uri: Uri = endpoint.parse().ok()?;
    let same = uri.scheme() == stream.scheme() && uri.authority() == stream.authority();
    same.then(|| uri.path_and_query().map_or("/", |p| p.as_str()).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_taken_on_the_streams_origin_only() {
        let stream: Uri = "http://up:8000/sse".parse().unwrap();
        let on = |e| same_origin(&stream, e);
        assert_eq!(
            on("/messages/?session_id=1").as_deref(),
            Some("/messages/?session_id=1")
        );
        assert_eq!(on("http://up:8000/m?s=1").as_deref(), Some("/m?s=1"));
        assert_eq!(on("messages?s=1").as_deref(), Some("/messages?s=1"));
        assert_eq!(on("http://elsewhere:8000/m"), None);
        assert_eq!(on("https://up:8000/m"), None);
        assert_eq!(on("//elsewhere/m"), None);
    }
}
