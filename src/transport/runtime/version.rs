//! Which HTTP a client connection speaks, learnt once, and the connection then served by
//! hyper's server for that version alone.
//!
//! Over TLS, ALPN says (RFC 9113 §3.2: HTTP/2 over TLS is negotiated as `h2`; a TLS client
//! that negotiates nothing speaks HTTP/1.1). In plain text, an HTTP/2 client with prior
//! knowledge opens with the connection preface (RFC 9113 §3.4): the first bytes are read until
//! they are the preface or differ from it, then given back to hyper from [`TimedIo`].
//!
//! Why not hyper-util's `auto` server, which does the same: it serves every read of the
//! connection's life through a second wrapper (the one that gives the first bytes back) and
//! every poll through its own state, about 0.3k instructions per validated call
//! (docs/performance.md).
//!
//! Caveat: a connection still to send its first bytes when shutdown starts is not waited
//! for; it has no request in flight.

use super::conn_timers::TimedIo;
use super::drain::Drain;
use crate::lograte::{LogRate, warn_at_rate};
use bytes::Bytes;
use futures_util::future::Either;
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper::service::HttpService;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::error::Error;
use std::future::Future;
use tokio::io::{AsyncRead, AsyncReadExt};

type BoxError = Box<dyn Error + Send + Sync>;

/// The HTTP/2 connection preface.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The HTTP a client connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Version {
    Http1,
    Http2,
}

impl Version {
    /// The version a TLS handshake settled: `h2`, or HTTP/1.1.
    pub(crate) fn negotiated(alpn: Option<&[u8]>) -> Version {
        match alpn {
            Some(b"h2") => Version::Http2,
            _ => Version::Http1,
        }
    }

    /// The version of a plaintext connection, from its first bytes (read through `io`, and
    /// given back to be read again). An end before the preface is complete is HTTP/1.1's,
    /// which hyper then reports as it would.
    pub(crate) async fn read<T: AsyncRead + Unpin>(
        io: &mut TimedIo<T>,
    ) -> std::io::Result<Version> {
        let mut first = [0u8; PREFACE.len()];
        let mut len = 0;
        let version = loop {
            let n = io.read(&mut first[len..]).await?;
            let was = len;
            len += n;
            if n == 0 || first[was..len] != PREFACE[was..len] {
                break Version::Http1;
            }
            if len == PREFACE.len() {
                break Version::Http2;
            }
        };
        io.unread(Bytes::copy_from_slice(&first[..len]));
        Ok(version)
    }
}

/// hyper's connection builder for each HTTP version, as configured for a listener.
#[derive(Clone)]
pub(crate) struct Builders {
    http1: http1::Builder,
    http2: http2::Builder<TokioExecutor>,
}

impl Builders {
    pub(crate) fn new() -> Builders {
        Builders {
            http1: http1::Builder::new(),
            http2: http2::Builder::new(TokioExecutor::new()),
        }
    }

    /// One connection served in `version` until it closes, closed gracefully when `drain`
    /// shuts down. Its errors (a client gone, a malformed head) end only that connection.
    /// Not an `async fn`: the connection's future is polled for each of its reads and
    /// writes, and a level of its own would be one more state to go through each time.
    pub(crate) fn serve<I, S, B>(
        &self,
        version: Version,
        io: I,
        service: S,
        drain: &Drain,
    ) -> impl Future<Output = Result<(), hyper::Error>> + Send + 'static
    where
        I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
        S: HttpService<Incoming, ResBody = B> + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
        B: http_body::Body + Send + 'static,
        B::Data: Send,
        B::Error: Into<BoxError>,
    {
        let io = TokioIo::new(io);
        match version {
            Version::Http1 => Either::Left(drain.watch(self.http1.serve_connection(io, service))),
            Version::Http2 => Either::Right(drain.watch(self.http2.serve_connection(io, service))),
        }
    }
}

/// How a client connection ended, said where an operator needs it: HTTP/2's bounds on
/// what a client may make it do (streams reset before they were served, as a rapid reset
/// attack does; a flood of small frames) close the connection, said at a rate with the
/// client's address. Every other end, a client gone or a malformed head, is the client's
/// own and said at `DEBUG`. The h2 crate's own lines for these are left out of the log
/// (`cli::main`'s filter): one per frame, they would let a client fill it.
pub(crate) fn ended(how: Result<(), hyper::Error>, peer: std::net::IpAddr) {
    let Err(e) = how else {
        return;
    };
    let h2 = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<h2::Error>());
    if let Some(h2) = h2.filter(|h2| h2.is_go_away() && h2.reason() == Some(CALM)) {
        warn_at_rate!(CALMED_SAID, "calmed", { peer = %peer, error = %h2, },
            "closed a client's HTTP/2 connection: it made toolgate reset or receive more streams or frames than HTTP/2 allows a client");
        return;
    }
    tracing::debug!(peer = %peer, error = %e, "a client connection ended with an error");
}

static CALMED_SAID: LogRate = LogRate::new();

/// The reason HTTP/2 closes a connection whose client exceeded its bounds with.
const CALM: h2::Reason = h2::Reason::ENHANCE_YOUR_CALM;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::runtime::conn_timers::ConnTimers;
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;

    async fn read_after(sent: &[&[u8]]) -> (Version, Vec<u8>) {
        let timers = ConnTimers::new(
            Duration::from_secs(10),
            Duration::from_secs(60),
            Duration::from_secs(60),
        );
        let (mut client, server) = tokio::io::duplex(64);
        let mut io = timers.io(server);
        for part in sent {
            client.write_all(part).await.unwrap();
        }
        drop(client);
        let version = Version::read(&mut io).await.unwrap();
        let mut again = Vec::new();
        io.read_to_end(&mut again).await.unwrap();
        (version, again)
    }

    #[tokio::test]
    async fn the_preface_says_http2_and_every_byte_is_read_again() {
        let h2 = [&PREFACE[..5], &PREFACE[5..], b"\0\0\x12\x04"].concat();
        assert_eq!(read_after(&[&h2]).await, (Version::Http2, h2.clone()));
        // Sent in pieces, as a client may.
        let pieces: Vec<&[u8]> = vec![&h2[..3], &h2[3..20], &h2[20..]];
        assert_eq!(read_after(&pieces).await, (Version::Http2, h2));
        let h1 = b"POST /mcp HTTP/1.1\r\nHost: a\r\n\r\n".to_vec();
        assert_eq!(read_after(&[&h1]).await, (Version::Http1, h1));
        // A client that says "PRI" and then something else, or ends: HTTP/1.1, its bytes kept.
        assert_eq!(
            read_after(&[b"PRI * HTTP/1.1\r\n"]).await,
            (Version::Http1, b"PRI * HTTP/1.1\r\n".to_vec())
        );
        assert_eq!(
            read_after(&[b"PRI *"]).await,
            (Version::Http1, b"PRI *".to_vec())
        );
        assert_eq!(read_after(&[]).await, (Version::Http1, Vec::new()));
    }

    #[test]
    fn alpn_says_http2_only_as_h2() {
        assert_eq!(Version::negotiated(Some(b"h2")), Version::Http2);
        assert_eq!(Version::negotiated(Some(b"http/1.1")), Version::Http1);
        assert_eq!(Version::negotiated(None), Version::Http1);
    }
}
