//! A session's own stream with an HTTP server (a GET), read by toolgate where it is the
//! client: the stdio front in front of an HTTP server, and a session toolgate keeps for
//! 2026-07-28 clients. What a server sends outside a request's answer comes there (a changed
//! tool list, its log, its own requests), and a server or a proxy on the way may end such a
//! stream at any time: a proxy that closes a connection quiet for a minute is common. Ended
//! or broken, the stream is opened again, from the last event the server numbered
//! (`Last-Event-ID`, SEP-1699), so that nothing sent meanwhile is lost to a server that keeps
//! it.
//!
//! Bounded: it is opened again after the time the server asked (`retry`), 1 s when it named
//! none; an opening that fails, or a stream that ends without a message, waits twice as long
//! as the one before, up to 30 s. It stops for good when the server has no stream for the
//! session (405, or a 4xx such as the session's 404: the session's end is the caller's
//! business), when the reader says to stop, or past an event over the size limit.

use super::http_client::HttpUpstream;
use crate::net::client::{Media, UpstreamBody, Wait};
use crate::transport::sse::{self, Read};
use bytes::Bytes;
use http::header::{ACCEPT, HeaderMap, HeaderValue};
use std::future::Future;
use std::time::Duration;

/// The wait before asking for a stream again when the server named none (`retry`), as the
/// TypeScript SDK's client waits: here, and for a request's stream (`exchange::resume`).
pub(crate) const DEFAULT_RETRY: Duration = Duration::from_secs(1);
/// The longest wait between two openings.
const MAX_WAIT: Duration = Duration::from_secs(30);

/// How opening the stream went.
pub(crate) enum Opened<B = UpstreamBody> {
    Stream(B),
    /// Not now (the server unreachable, or failing): try again later.
    Again,
    /// The server has no stream for the session: do not try again.
    Never,
}

/// Opens the session's stream with `headers` (its session, version and credentials), from
/// the event `last_id` when there is one.
pub(crate) async fn open(
    up: &HttpUpstream,
    mut headers: HeaderMap,
    last_id: Option<String>,
    wait: Wait,
) -> Opened {
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    if let Some(id) = last_id.and_then(|id| HeaderValue::from_str(&id).ok()) {
        headers.insert("last-event-id", id);
    }
    let resp = match up
        .http
        .send(http::Method::GET, headers, Bytes::new(), wait)
        .await
    {
        Ok(resp) => resp,
        Err(_) => return Opened::Again,
    };
    let status = resp.status();
    match status.is_success() && resp.body().media() == Media::EventStream {
        true => Opened::Stream(resp.into_body()),
        false if status.is_server_error() => Opened::Again,
        false => Opened::Never,
    }
}

/// Reads the stream `open` opens, each message's data to `each` (`false`: stop), opening it
/// again as the module says. Before each read it awaits `ready`: a reader that passes the
/// messages on to a slower one holds the server back by TCP instead of holding them. Returns
/// how the last reading ended.
pub(crate) async fn follow<O, F, B, R>(
    mut open: O,
    max_event: usize,
    ready: impl Fn() -> R,
    mut each: impl FnMut(&str) -> bool,
) -> Read
where
    O: FnMut(Option<String>) -> F,
    F: Future<Output = Opened<B>>,
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
    R: Future<Output = ()>,
{
    let (mut last_id, mut retry) = (None::<String>, None::<Duration>);
    let mut wait = Duration::ZERO;
    loop {
        tokio::time::sleep(wait).await;
        let body = match open(last_id.clone()).await {
            Opened::Stream(body) => body,
            Opened::Never => return Read::Ended,
            Opened::Again => {
                wait = longer(wait);
                continue;
            }
        };
        let (mut events, mut heard) = (sse::Events::new(body, max_event), false);
        let read = loop {
            ready().await;
            let ev = match events.next().await {
                Ok(Some(ev)) => ev,
                Ok(None) => break Read::Ended,
                Err(end) => break end,
            };
            let place = sse::place(&ev);
            if let Some(id) = place.id {
                last_id = Some(id.into_owned());
            }
            if let Some(ms) = place.retry {
                retry = Some(Duration::from_millis(ms));
            }
            if let Some(d) = sse::data(&ev).filter(|d| !d.is_empty()) {
                heard = true;
                if !each(&d) {
                    break Read::Stopped;
                }
            }
        };
        if matches!(read, Read::Stopped | Read::Overflowed) {
            return read;
        }
        let asked = retry.unwrap_or(DEFAULT_RETRY).min(MAX_WAIT);
        wait = if heard {
            asked
        } else {
            longer(wait).max(asked)
        };
    }
}

/// The wait before a stream is opened again after `wait`, which found nothing: twice as
/// long, from 1 s up to 30 s.
pub(crate) fn longer(wait: Duration) -> Duration {
    (wait * 2).clamp(DEFAULT_RETRY, MAX_WAIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// For a reader that never waits.
    async fn at_once() {}
    use http_body_util::Full;
    use std::sync::Mutex;

    /// Each opening gets the next of these; past them, the server has no stream.
    fn server(
        streams: Vec<Option<&'static str>>,
    ) -> impl FnMut(Option<String>) -> std::future::Ready<Opened<Full<Bytes>>> {
        let mut streams = streams.into_iter();
        move |_| {
            std::future::ready(match streams.next() {
                Some(Some(text)) => Opened::Stream(Full::new(Bytes::from_static(text.as_bytes()))),
                Some(None) => Opened::Again,
                None => Opened::Never,
            })
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_is_opened_again_from_its_last_event_after_the_time_asked() {
        let asked_from = Mutex::new(Vec::new());
        let mut streams = server(vec![
            Some("id: 1\nretry: 200\ndata: a\n\n"),
            Some("data: b\n\nid: 2\ndata: c\n\n"),
        ]);
        let open = |last_id: Option<String>| {
            asked_from
                .lock()
                .unwrap()
                .push((last_id.clone(), tokio::time::Instant::now()));
            streams(last_id)
        };
        let mut read = Vec::new();
        let started = tokio::time::Instant::now();
        let end = follow(open, 1024, at_once, |d| {
            read.push(d.to_owned());
            true
        })
        .await;
        assert_eq!(end, Read::Ended);
        assert_eq!(read, ["a", "b", "c"]);
        let asked = asked_from.into_inner().unwrap();
        let from: Vec<_> = asked.iter().map(|(id, _)| id.as_deref()).collect();
        assert_eq!(from, [None, Some("1"), Some("2")]);
        let waited: Vec<_> = asked.iter().map(|(_, at)| *at - started).collect();
        let ms = Duration::from_millis;
        assert_eq!(waited, [ms(0), ms(200), ms(400)]);
    }

    #[tokio::test(start_paused = true)]
    async fn openings_that_find_nothing_wait_longer_each_time_up_to_30_s() {
        let at = Mutex::new(Vec::new());
        let mut streams = server(vec![
            None,
            Some("id: 1\n\n"),
            None,
            None,
            None,
            None,
            None,
            None,
        ]);
        let open = |last_id| {
            at.lock().unwrap().push(tokio::time::Instant::now());
            streams(last_id)
        };
        let started = tokio::time::Instant::now();
        follow(open, 1024, at_once, |_| true).await;
        let waits: Vec<u64> = (at.into_inner().unwrap().windows(2))
            .map(|w| (w[1] - w[0]).as_secs())
            .collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30, 30]);
        assert!(started.elapsed() < Duration::from_secs(130));
    }

    #[tokio::test(start_paused = true)]
    async fn the_reader_stops_it() {
        let open = server(vec![Some("data: a\n\ndata: b\n\n"), Some("data: c\n\n")]);
        let mut read = Vec::new();
        let end = follow(open, 1024, at_once, |d| {
            read.push(d.to_owned());
            false
        })
        .await;
        assert_eq!((end, read), (Read::Stopped, vec!["a".to_owned()]));
    }
}
