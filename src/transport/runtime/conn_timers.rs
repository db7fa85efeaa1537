//! Per-connection timers for the client side: a connection that is slow to send a request's
//! head, or that sits idle between requests, is closed.
//!
//! hyper's own `header_read_timeout` starts whenever the connection waits for a head, idle
//! keep-alive included, so it cannot tell "half a head for 10 s" (an attack) from "no request
//! for 10 s" (a client between calls). Here the connection knows whether a request is in
//! service (from the service call until its response body is dropped, so a quiet SSE stream
//! is never idle) and whether bytes of the next head have come:
//! - a new connection: closed `head` after it was accepted, unless its first request's
//!   head has come (a connection that sends nothing is no client between calls);
//! - no request in service, no byte since the last one ended: closed after `idle`;
//! - no request in service, a byte has come: closed `head` after that byte. Over HTTP/2 the
//!   bytes between requests are the protocol's own frames (a settings acknowledgement, a
//!   ping, a window update), not a head: such a connection is closed after `idle` only.
//!
//! The timer lives in the connection's reads: hyper reads whenever it waits for a head, so
//! an expired timer surfaces as a read error (`TimedOut`) and hyper closes the connection.
//! Caveat: bytes that arrive while a request is in service (a pipelined head) are not
//! timed as a head; the idle timer covers them once the request ends.

use crate::kept_timer::KeptTimer;
use crate::locks::MutexExt;
use bytes::Bytes;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

struct State {
    in_service: usize,
    idle_since: Instant,
    head_started: Option<Instant>,
    /// The connection speaks HTTP/2 (its requests say so).
    multiplexed: bool,
}

/// The shared state of one connection: its IO and its requests hold it.
#[derive(Clone)]
pub struct ConnTimers {
    state: Arc<Mutex<State>>,
    head: Duration,
    idle: Duration,
}

impl ConnTimers {
    pub fn new(head: Duration, idle: Duration) -> ConnTimers {
        ConnTimers {
            state: Arc::new(Mutex::new(State {
                in_service: 0,
                idle_since: Instant::now(),
                // From the accept: the first head is due `head` after it.
                head_started: Some(Instant::now()),
                multiplexed: false,
            })),
            head,
            idle,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.locked()
    }

    /// A request is in service until the returned guard is dropped (with its response body).
    /// `http2`: it came over HTTP/2.
    pub fn in_service(&self, http2: bool) -> InService {
        let mut s = self.lock();
        s.in_service += 1;
        s.multiplexed |= http2;
        drop(s);
        InService(self.clone())
    }

    /// The connection's IO, timed.
    pub fn io<T>(&self, io: T) -> TimedIo<T> {
        TimedIo {
            io,
            timers: self.clone(),
            timer: None,
            unread: Bytes::new(),
        }
    }

    /// When the connection must close if nothing changes; `None` while a request is in
    /// service.
    fn deadline(&self) -> Option<Instant> {
        let s = self.lock();
        (s.in_service == 0).then(|| match s.head_started {
            Some(t) => t + self.head,
            None => s.idle_since + self.idle,
        })
    }
}

/// Marks a request in service; see [`ConnTimers::in_service`].
pub struct InService(ConnTimers);

impl Drop for InService {
    fn drop(&mut self) {
        let mut s = self.0.lock();
        s.in_service -= 1;
        if s.in_service == 0 {
            s.idle_since = Instant::now();
            s.head_started = None;
        }
    }
}

/// A connection's IO under [`ConnTimers`].
pub struct TimedIo<T> {
    io: T,
    timers: ConnTimers,
    timer: Option<KeptTimer>,
    /// Bytes read before hyper took the connection, read again first (see [`Self::unread`]).
    unread: Bytes,
}

impl<T> TimedIo<T> {
    /// Gives `bytes` back, to be read again before anything more from the connection: what
    /// was read to learn the connection's HTTP version (`version`). Here, in the wrapper every
    /// read passes through anyway, rather than in a second one.
    pub(crate) fn unread(&mut self, bytes: Bytes) {
        self.unread = bytes;
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for TimedIo<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.unread.is_empty() {
            let n = this.unread.len().min(buf.remaining());
            buf.put_slice(&this.unread.split_to(n));
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(r) => {
                if buf.filled().len() > before {
                    let mut s = this.timers.lock();
                    if s.in_service == 0 && s.head_started.is_none() && !s.multiplexed {
                        s.head_started = Some(Instant::now());
                    }
                }
                Poll::Ready(r)
            }
            Poll::Pending => {
                let Some(deadline) = this.timers.deadline() else {
                    return Poll::Pending;
                };
                // Moved only when the deadline comes earlier (a head started); a later one
                // (each request ends a new idle period) is found when the timer fires.
                let timer = this.timer.get_or_insert_with(|| KeptTimer::new(deadline));
                std::task::ready!(timer.poll_until(deadline, cx));
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the connection was idle or slow to send a request head",
                )))
            }
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for TimedIo<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Applies [`MarkInService`] to a connection's service: the stack's outermost layer, so the
/// connection counts a request in service from its call until its answer's body is gone.
#[derive(Clone)]
pub struct InServiceLayer(ConnTimers);

impl InServiceLayer {
    pub fn new(timers: ConnTimers) -> InServiceLayer {
        InServiceLayer(timers)
    }
}

impl<S> tower_layer::Layer<S> for InServiceLayer {
    type Service = MarkInService<S>;

    fn layer(&self, inner: S) -> MarkInService<S> {
        MarkInService {
            inner,
            timers: self.0.clone(),
        }
    }
}

/// Marks each request in service until its answer's body is sent or dropped, so a quiet
/// stream is never taken for an idle connection.
#[derive(Clone)]
pub struct MarkInService<S> {
    inner: S,
    timers: ConnTimers,
}

impl<S, ReqB, B> tower_service::Service<http::Request<ReqB>> for MarkInService<S>
where
    S: tower_service::Service<http::Request<ReqB>, Response = http::Response<B>>,
    S::Future: Unpin,
{
    type Response = http::Response<InServiceBody<B>>;
    type Error = S::Error;
    type Future = InServiceFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<ReqB>) -> Self::Future {
        let http2 = req.version() == http::Version::HTTP_2;
        InServiceFuture {
            in_service: Some(self.timers.in_service(http2)),
            inner: self.inner.call(req),
        }
    }
}

/// The inner service's answer, its body holding the request in service.
pub struct InServiceFuture<F> {
    inner: F,
    in_service: Option<InService>,
}

impl<F, B, E> std::future::Future for InServiceFuture<F>
where
    F: std::future::Future<Output = Result<http::Response<B>, E>> + Unpin,
{
    type Output = Result<http::Response<InServiceBody<B>>, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let resp = std::task::ready!(Pin::new(&mut self.inner).poll(cx))?;
        let in_service = self.in_service.take();
        Poll::Ready(Ok(resp.map(|body| InServiceBody {
            body,
            _in_service: in_service,
        })))
    }
}

/// A response body that keeps its request in service until it has been sent or dropped.
pub struct InServiceBody<B> {
    body: B,
    _in_service: Option<InService>,
}

impl<B> http_body::Body for InServiceBody<B>
where
    B: http_body::Body + Unpin,
{
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<B::Data>, B::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn idle_and_slow_heads_are_closed_but_requests_in_service_are_not() {
        let (client, server) = tokio::io::duplex(64);
        let timers = ConnTimers::new(Duration::from_secs(10), Duration::from_secs(60));
        let mut io = timers.io(server);
        let mut buf = [0u8; 8];
        // In service: no timer, however long.
        let guard = timers.in_service(false);
        let read = tokio::time::timeout(Duration::from_secs(600), io.read(&mut buf)).await;
        assert!(read.is_err(), "still waiting after 600 s in service");
        drop(guard);
        // Idle: closed after 60 s.
        let started = Instant::now();
        let e = io.read(&mut buf).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(60));
        // A head that starts and stalls after a request: closed 10 s after its first byte.
        let timers = ConnTimers::new(Duration::from_secs(10), Duration::from_secs(60));
        let (mut client2, server2) = tokio::io::duplex(64);
        let mut io = timers.io(server2);
        drop(timers.in_service(false));
        client2.write_all(b"GET").await.unwrap();
        assert_eq!(io.read(&mut buf).await.unwrap(), 3);
        let started = Instant::now();
        let e = io.read(&mut buf).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        drop(client);
    }

    #[tokio::test(start_paused = true)]
    async fn a_new_connection_owes_its_first_head_and_http2_frames_are_no_head() {
        let timers = ConnTimers::new(Duration::from_secs(10), Duration::from_secs(60));
        let (_client, server) = tokio::io::duplex(64);
        let mut io = timers.io(server);
        let mut buf = [0u8; 8];
        let started = Instant::now();
        let e = io.read(&mut buf).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(10), "nothing sent");
        // Over HTTP/2, a frame after an answer is not a head: the idle timer holds.
        let timers = ConnTimers::new(Duration::from_secs(10), Duration::from_secs(60));
        let (mut client, server) = tokio::io::duplex(64);
        let mut io = timers.io(server);
        drop(timers.in_service(true));
        let started = Instant::now();
        client.write_all(b"ping").await.unwrap();
        assert_eq!(io.read(&mut buf).await.unwrap(), 4);
        let e = io.read(&mut buf).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(60));
    }

    /// The timer wakes the task that last waited on the connection, not one before it.
    #[tokio::test(start_paused = true)]
    async fn the_timer_wakes_the_last_task_to_wait() {
        #[derive(Default)]
        struct Woken(std::sync::atomic::AtomicBool);
        impl std::task::Wake for Woken {
            fn wake(self: Arc<Self>) {
                self.0.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        let timers = ConnTimers::new(Duration::from_secs(10), Duration::from_secs(60));
        let (_client, server) = tokio::io::duplex(64);
        let mut io = timers.io(server);
        drop(timers.in_service(false));
        let mut buf = [0u8; 8];
        let mut read = |woken: &Arc<Woken>| {
            let waker = Waker::from(woken.clone());
            let mut buf = ReadBuf::new(&mut buf);
            Pin::new(&mut io).poll_read(&mut Context::from_waker(&waker), &mut buf)
        };
        let (first, last) = (Arc::new(Woken::default()), Arc::new(Woken::default()));
        assert!(read(&first).is_pending() && read(&first).is_pending());
        assert!(read(&last).is_pending());
        tokio::time::advance(Duration::from_secs(61)).await;
        assert!(
            last.0.load(std::sync::atomic::Ordering::SeqCst),
            "the last task is woken"
        );
        let Poll::Ready(Err(e)) = read(&last) else {
            panic!("the idle connection is closed");
        };
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test]
    async fn a_request_is_in_service_until_its_answer_body_is_gone() {
        use tower::{Layer, ServiceExt};
        let timers = ConnTimers::new(Duration::from_secs(10), Duration::from_secs(60));
        let in_service = || timers.lock().in_service;
        let inner = tower::service_fn(|_: http::Request<()>| {
            std::future::ready(Ok::<_, std::convert::Infallible>(http::Response::new(
                http_body_util::Empty::<bytes::Bytes>::new(),
            )))
        });
        let svc = InServiceLayer::new(timers.clone()).layer(inner);
        let answer = svc.oneshot(http::Request::new(()));
        let resp = answer.await.unwrap();
        assert_eq!(in_service(), 1, "the answer's body is still to be sent");
        drop(resp);
        assert_eq!(in_service(), 0);
    }
}
