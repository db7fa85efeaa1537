//! A request's stream that its HTTP server ends before the answer, resumed by toolgate
//! (SEP-1699): a server may close a call's stream at will, having numbered its events, and
//! send the rest when asked again with `Last-Event-ID`. toolgate asks, as a client would,
//! and goes on reading what comes back as the same answer, under the same rules: the client
//! sees one stream, and an answer a server sends on a resumed stream is rewritten, masked and
//! checked as any other. A stdio client, which cannot resume anything, gets its answer too.
//!
//! Kept for the requests of a server that numbers its streams: the request's headers
//! (its session, version and credentials) are what the resumed stream is asked with.

use crate::net::client::{Media, UpstreamBody, Wait};
use crate::transport::upstream::http_client::HttpUpstream;
use crate::transport::upstream::session_stream::DEFAULT_RETRY;
use bytes::Bytes;
use http::HeaderMap;
use http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// What asking for a request's stream again needs.
pub(crate) struct Resumer {
    up: Arc<HttpUpstream>,
    /// The request's headers as it went to the server.
    headers: HeaderMap,
    wait: Wait,
    /// Since when the server has sent no message while its stream was resumed, and how many
    /// it had sent then: the wait for the next is bounded by `wait.answer`, as a server's
    /// time to answer is.
    quiet: Option<(Instant, u64)>,
}

/// Why a stream the server ended could not be resumed: said in the request's answer.
pub(crate) type NotResumed = String;

impl Resumer {
    pub(crate) fn new(up: Arc<HttpUpstream>, headers: HeaderMap, wait: Wait) -> Resumer {
        Resumer {
            up,
            headers,
            wait,
            quiet: None,
        }
    }

    /// The server whose stream it asks for again.
    pub(crate) fn server(&self) -> &HttpUpstream {
        &self.up
    }

    /// The stream again from the event `last_id`, after the server's `retry` time: its body,
    /// or why not. `heard` counts the messages read so far, so that a resumption that
    /// brought one starts the bound on the server's silence again.
    pub(crate) async fn resume(
        &mut self,
        last_id: &Bytes,
        retry: Option<Duration>,
        heard: u64,
    ) -> Result<UpstreamBody, NotResumed> {
        let now = Instant::now();
        let since = match self.quiet {
            Some((since, before)) if before == heard => since,
            _ => now,
        };
        self.quiet = Some((since, heard));
        let left = (self.wait.answer).saturating_sub(now - since);
        if left.is_zero() {
            let secs = self.wait.answer.as_secs_f64();
            return Err(format!(
                "the server ended its stream again and sent nothing for {secs:.0} s"
            ));
        }
        tokio::time::sleep(retry.unwrap_or(DEFAULT_RETRY).min(left)).await;
        let last_id = HeaderValue::from_maybe_shared(last_id.clone()).map_err(|e| e.to_string())?;
        let mut headers = self.headers.clone();
        headers.remove(CONTENT_TYPE);
        headers.remove(CONTENT_LENGTH);
        headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        headers.insert("last-event-id", last_id);
        let resp = (self.up.http.resume(headers, self.wait).await).map_err(|e| e.to_string())?;
        let status = resp.status();
        if !status.is_success() || resp.body().media() != Media::EventStream {
            return Err(format!(
                "the server answered its resumption with HTTP {}",
                status.as_u16()
            ));
        }
        Ok(resp.into_body())
    }
}
