//! A handshake-era HTTP client's request to a server that speaks only 2026-07-28, answered
//! with an `InputRequiredResult`: the client is asked the server's questions on the
//! request's SSE stream, as a server of its own era would ask them, and its answers (POSTed
//! in its session, taken in `gate`) go back to the server in retries (`pipeline::asked`).
//! The server's last answer, after the answer rules, ends the stream.

use super::StreamOutcome;
use crate::gateway::Gateway;
use crate::pipeline::asked::{self, Retries};
use crate::pipeline::bridge::Reverse;
use crate::pipeline::{self, Pending};
use crate::transport::sse;
use crate::transport::upstream::child::ChildRetrying;
use crate::transport::upstream::http_client::HttpRetrying;
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use std::sync::Arc;
use tokio::sync::mpsc;

/// What a request's rounds need, should its server ask for input: the request as it was
/// sent, the client's session (where its answers arrive), and the way to retry the server.
pub(crate) struct ReverseRounds {
    pub(crate) request: Bytes,
    pub(crate) reverse: Arc<Reverse>,
    pub(crate) server: RetryServer,
}

/// The kinds of server a handshake-era HTTP client is bridged to.
pub(crate) enum RetryServer {
    Http(Box<HttpRetrying>),
    Child(ChildRetrying),
}

impl Retries for RetryServer {
    async fn retry(&self, request: Bytes, id: &str) -> Result<Bytes, crate::error::UpstreamError> {
        match self {
            RetryServer::Http(s) => s.retry(request, id).await,
            RetryServer::Child(s) => s.retry(request, id).await,
        }
    }
}

/// The answer to `pending` when its server's answer `held` asks for input: an SSE stream of
/// toolgate's questions, then the server's last answer.
pub(crate) fn answer(
    gw: &Arc<Gateway>,
    pending: Pending,
    held: Bytes,
    reverse_rounds: ReverseRounds,
) -> Response {
    let outcome = StreamOutcome::default();
    let rounds = AskingStream::start(gw, pending, held, reverse_rounds, outcome.clone());
    let stream = futures_util::stream::unfold(rounds, |mut rounds| async move {
        let event = rounds.next().await?;
        Some((Ok::<_, std::convert::Infallible>(event), rounds))
    });
    let mut resp = Response::new(Body::from_stream(stream));
    // Its span ends with the stream, as a streamed answer's does.
    resp.extensions_mut().insert(outcome);
    let headers = resp.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

/// The rounds of one request, run on a task of their own: its SSE events as they come (each
/// question, then the last answer). Dropped with the client's stream, they end: nobody is
/// left to ask.
pub(crate) struct AskingStream {
    events: mpsc::UnboundedReceiver<Bytes>,
    task: tokio::task::JoinHandle<()>,
}

impl AskingStream {
    /// Starts the rounds of `held`, the server's answer to `pending`; `outcome` says how the
    /// stream ended when toolgate had to answer.
    pub(crate) fn start(
        gw: &Arc<Gateway>,
        pending: Pending,
        held: Bytes,
        reverse_rounds: ReverseRounds,
        outcome: StreamOutcome,
    ) -> AskingStream {
        let (tx, events) = mpsc::unbounded_channel::<Bytes>();
        let gw = gw.clone();
        let task = tokio::spawn(async move {
            let ReverseRounds {
                request,
                reverse,
                server,
            } = reverse_rounds;
            let ask = |question: Bytes| {
                let _ = tx.send(sse::event(&question));
            };
            let own_id = || gw.next_id();
            let last = asked::answered(&request, held, &reverse.asked, ask, &server, own_id).await;
            let body = match last {
                Ok(answer) => {
                    pipeline::settle_bytes(&gw, &pending, answer.clone()).map_or(answer, |s| s.body)
                }
                Err(e) => {
                    outcome.set(e.outcome());
                    match pipeline::unanswered(&gw, &pending, &e) {
                        Some(a) => Bytes::from(a.body),
                        None => return,
                    }
                }
            };
            let _ = tx.send(sse::event(&body));
        });
        AskingStream { events, task }
    }

    pub(crate) async fn next(&mut self) -> Option<Bytes> {
        self.events.recv().await
    }
}

impl Drop for AskingStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}
