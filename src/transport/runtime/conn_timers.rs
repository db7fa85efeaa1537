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
//!
//! A client that takes nothing of what waits for it is closed too, `send` after it stopped
//! (at most twice that): an answer waiting for such a client stays counted against the
//! budget of answers, so it must not wait forever (docs/security.md). It waits in one of
//! two places. A client that reads nothing from its connection fills the socket, and a
//! write finds it full; over HTTP/2 a client may read its connection and still give no
//! flow-control window to an answer, whose body then is not polled again after a slice
//! (`InServiceBody`). The watch looks every `send` while either holds: when something
//! waited at two looks in a row and nothing was taken between them, the write or read it
//! runs in fails with `TimedOut`. It runs in a write that finds the connection full (hyper
//! writes again whenever the socket or the watch's timer wakes it), and over HTTP/2 in the
//! connection's reads, which hyper polls always; an HTTP/1.1 connection's reads are not
//! watched, so that a call pays for no timer there.
//!
//! A listener past its cap closes a connection with no request in service to make room for
//! a newer one (`runtime::slots`): its next read fails, and the task waiting on the read is
//! woken for it (kept while no request is in service; a keep-alive connection keeps the same
//! one, so that a request pays one comparison).

use crate::kept_timer::KeptTimer;
use crate::locks::MutexExt;
use crate::lograte::{LogRate, warn_at_rate};
use bytes::Bytes;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
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
    /// A request has been served on it.
    served: bool,
    /// Closed to make room for a newer connection (`runtime::slots`).
    closed: bool,
    /// The task that reads the connection while no request is in service, woken to close it.
    reader: Option<std::task::Waker>,
}

/// Clients that stop taking what waits for them can be many.
static STALLED_SAID: LogRate = LogRate::new();

struct Shared {
    state: Mutex<State>,
    /// HTTP/2 answers whose last slice waits for the client to take it.
    waiting: AtomicUsize,
    /// Counts each end of such a wait.
    taken: AtomicU64,
}

/// The shared state of one connection: its IO and its requests hold it.
#[derive(Clone)]
pub struct ConnTimers {
    shared: Arc<Shared>,
    head: Duration,
    idle: Duration,
    send: Duration,
}

impl ConnTimers {
    pub fn new(head: Duration, idle: Duration, send: Duration) -> ConnTimers {
        let state = State {
            in_service: 0,
            idle_since: Instant::now(),
            // From the accept: the first head is due `head` after it.
            head_started: Some(Instant::now()),
            multiplexed: false,
            served: false,
            closed: false,
            reader: None,
        };
        ConnTimers {
            shared: Arc::new(Shared {
                state: Mutex::new(state),
                waiting: AtomicUsize::new(0),
                taken: AtomicU64::new(0),
            }),
            head,
            idle,
            send,
        }
    }

    /// The timers `limits` set for a client connection, on either listener.
    pub fn of(limits: &crate::config::Limits) -> ConnTimers {
        ConnTimers::new(
            limits.header_timeout,
            limits.idle_timeout,
            limits.send_timeout,
        )
    }

    /// Whether a request is in service on the connection.
    pub(crate) fn serving(&self) -> bool {
        self.lock().in_service > 0
    }

    /// Whether no request has been served on the connection since its accept.
    pub(crate) fn unserved(&self) -> bool {
        !self.lock().served
    }

    /// Closes the connection, if no request is in service on it, to make room for a newer
    /// one: its next read fails, and the task waiting to read is woken for it.
    pub(crate) fn close(&self) {
        let mut s = self.lock();
        s.closed = true;
        if let Some(reader) = s.reader.take() {
            reader.wake();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.shared.state.locked()
    }

    /// A request is in service until the returned guard is dropped (with its response body).
    /// `http2`: it came over HTTP/2.
    pub fn in_service(&self, http2: bool) -> InService {
        let mut s = self.lock();
        s.in_service += 1;
        s.served = true;
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
            watch: Watch::default(),
        }
    }

    /// What a read that waits is timed by; `reader` is kept to be woken while no request
    /// is in service.
    fn read_wait(&self, reader: &std::task::Waker) -> ReadWait {
        let mut s = self.lock();
        if s.in_service == 0 && !s.reader.as_ref().is_some_and(|r| r.will_wake(reader)) {
            s.reader = Some(reader.clone());
        }
        match (s.in_service, s.head_started) {
            (0, _) if s.closed => ReadWait::Closed,
            (0, Some(t)) => ReadWait::Until(t + self.head),
            (0, None) => ReadWait::Until(s.idle_since + self.idle),
            _ if s.multiplexed => ReadWait::Watched,
            _ => ReadWait::Untimed,
        }
    }
}

enum ReadWait {
    /// Closed to make room for a newer connection.
    Closed,
    /// No request in service: the connection closes then if nothing changes.
    Until(Instant),
    /// A request in service over HTTP/2, whose answers may wait for a window: the watch.
    Watched,
    /// A request in service over HTTP/1.1: an answer that waits, waits in a write.
    Untimed,
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
    watch: Watch,
}

/// The watch on a client that takes nothing (the module's doc).
#[derive(Default)]
struct Watch {
    timer: Option<KeptTimer>,
    next_look: Option<Instant>,
    /// A write found the connection full, and none has gone through since.
    blocked: bool,
    /// Writes that went through after one found the connection full.
    unblocked: u64,
    /// What the last look saw, when something waited: the count of what was taken.
    last: Option<u64>,
}

impl Watch {
    /// Ready with the error that closes the connection once its client took nothing for a
    /// whole `send`; until then, the task of `cx` is woken for the next look.
    fn poll(&mut self, timers: &ConnTimers, cx: &mut Context<'_>) -> Poll<io::Error> {
        loop {
            let at = *(self.next_look).get_or_insert_with(|| Instant::now() + timers.send);
            let timer = self.timer.get_or_insert_with(|| KeptTimer::new(at));
            std::task::ready!(timer.poll_until(at, cx));
            let shared = &timers.shared;
            let waits = self.blocked || shared.waiting.load(Relaxed) > 0;
            let taken = self.unblocked + shared.taken.load(Relaxed);
            if waits && self.last == Some(taken) {
                let said = "closing a client connection: its client took nothing of what waited for it within limits.send_timeout";
                warn_at_rate!(STALLED_SAID, "stalled", { send_timeout = ?timers.send, }, said);
                return Poll::Ready(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client took nothing of what waited for it",
                ));
            }
            self.last = waits.then_some(taken);
            self.next_look = Some(Instant::now() + timers.send);
        }
    }

    /// A write's outcome, seen by the watch: one that finds the connection full waits under
    /// it.
    fn wrote<R>(
        &mut self,
        r: Poll<io::Result<R>>,
        timers: &ConnTimers,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<R>> {
        if r.is_pending() {
            self.blocked = true;
            return self.poll(timers, cx).map(Err);
        }
        if self.blocked {
            self.blocked = false;
            self.unblocked += 1;
        }
        r
    }
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
                let deadline = match this.timers.read_wait(cx.waker()) {
                    ReadWait::Closed => {
                        return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into()));
                    }
                    ReadWait::Until(deadline) => deadline,
                    ReadWait::Watched => return this.watch.poll(&this.timers, cx).map(Err),
                    ReadWait::Untimed => return Poll::Pending,
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
        let this = &mut *self;
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        this.watch.wrote(r, &this.timers, cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.watch.wrote(r, &this.timers, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let r = Pin::new(&mut this.io).poll_flush(cx);
        this.watch.wrote(r, &this.timers, cx)
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
            http2,
            inner: self.inner.call(req),
        }
    }
}

/// The inner service's answer, its body holding the request in service.
pub struct InServiceFuture<F> {
    inner: F,
    in_service: Option<InService>,
    http2: bool,
}

impl<F, B, E> std::future::Future for InServiceFuture<F>
where
    F: std::future::Future<Output = Result<http::Response<B>, E>> + Unpin,
{
    type Output = Result<http::Response<InServiceBody<B>>, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let resp = std::task::ready!(Pin::new(&mut self.inner).poll(cx))?;
        let (in_service, http2) = (self.in_service.take(), self.http2);
        Poll::Ready(Ok(resp.map(|body| InServiceBody {
            body,
            in_service,
            http2,
            rest: Bytes::new(),
            waits: false,
        })))
    }
}

/// The most of an answer handed to HTTP/2 at once: what hyper hands on, HTTP/2 keeps until
/// the client's flow-control window takes it, out of the watch's sight. The rest stays here,
/// where a body not polled again is seen waiting.
const HTTP2_SLICE: usize = 64 * 1024;

/// A response body that keeps its request in service until it has been sent or dropped.
/// Over HTTP/2 it hands its data on in slices, each counted as waiting until the body is
/// polled again (the module's doc).
pub struct InServiceBody<B> {
    body: B,
    in_service: Option<InService>,
    http2: bool,
    /// What is left of a data frame larger than a slice.
    rest: Bytes,
    /// A slice was handed on and the body has not been polled since.
    waits: bool,
}

impl<B> InServiceBody<B> {
    /// The next slice of `rest`, handed on over HTTP/2 and counted as waiting.
    fn next_slice(&mut self) -> Bytes {
        if let Some(InService(timers)) = &self.in_service {
            timers.shared.waiting.fetch_add(1, Relaxed);
            self.waits = true;
        }
        self.rest.split_to(self.rest.len().min(HTTP2_SLICE))
    }

    /// Ends the wait of the slice handed on last: the client took it (or the body goes).
    fn taken(&mut self) {
        if std::mem::take(&mut self.waits)
            && let Some(InService(timers)) = &self.in_service
        {
            timers.shared.waiting.fetch_sub(1, Relaxed);
            timers.shared.taken.fetch_add(1, Relaxed);
        }
    }
}

impl<B> Drop for InServiceBody<B> {
    fn drop(&mut self) {
        self.taken();
    }
}

impl<B> http_body::Body for InServiceBody<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, B::Error>>> {
        let this = &mut *self;
        if !this.http2 {
            return Pin::new(&mut this.body).poll_frame(cx);
        }
        this.taken();
        if this.rest.is_empty() {
            match std::task::ready!(Pin::new(&mut this.body).poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => this.rest = data,
                    Err(frame) => return Poll::Ready(Some(Ok(frame))),
                },
                end => return Poll::Ready(end),
            }
        }
        Poll::Ready(Some(Ok(http_body::Frame::data(this.next_slice()))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_empty() && self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        let mut hint = self.body.size_hint();
        let rest = self.rest.len() as u64;
        hint.set_lower(hint.lower() + rest);
        if let Some(upper) = hint.upper() {
            hint.set_upper(upper + rest);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tower::{Layer, ServiceExt};

    #[tokio::test(start_paused = true)]
    async fn idle_and_slow_heads_are_closed_but_requests_in_service_are_not() {
        let (client, server) = tokio::io::duplex(64);
        let timers = conn_timers(60);
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
        let timers = conn_timers(60);
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
        let timers = conn_timers(60);
        let (_client, server) = tokio::io::duplex(64);
        let mut io = timers.io(server);
        let mut buf = [0u8; 8];
        let started = Instant::now();
        let e = io.read(&mut buf).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(10), "nothing sent");
        // Over HTTP/2, a frame after an answer is not a head: the idle timer holds.
        let timers = conn_timers(60);
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
        let timers = conn_timers(60);
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

    fn conn_timers(send: u64) -> ConnTimers {
        let secs = Duration::from_secs;
        ConnTimers::new(secs(10), secs(60), secs(send))
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_takes_nothing_is_closed_and_a_slow_reader_is_not() {
        let timers = conn_timers(60);
        let (mut client, server) = tokio::io::duplex(64);
        let mut io = timers.io(server);
        let _guard = timers.in_service(false);
        // Read a byte every 50 s: slow, never stalled for 60 s.
        let reader = tokio::spawn(async move {
            let mut byte = [0u8; 1];
            for _ in 0..20 {
                tokio::time::sleep(Duration::from_secs(50)).await;
                client.read_exact(&mut byte).await.unwrap();
            }
            client
        });
        io.write_all(&[b'x'; 64 + 20]).await.unwrap();
        // The reader stops: the next write waits, then fails.
        let _client = reader.await.unwrap();
        let started = Instant::now();
        let e = io.write_all(&[b'x'; 1]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        let waited = started.elapsed();
        assert!(secs_between(waited, 60, 120), "closed after {waited:?}");
    }

    fn secs_between(d: Duration, low: u64, high: u64) -> bool {
        (Duration::from_secs(low)..=Duration::from_secs(high)).contains(&d)
    }

    /// An HTTP/2 answer whose slice is not taken waits in no write: the connection's reads
    /// see it, and close the connection; an answer taken to its end leaves nothing waiting.
    #[tokio::test(start_paused = true)]
    async fn an_http2_answer_the_client_takes_nothing_of_closes_its_connection() {
        use http_body::Body as _;
        use http_body_util::BodyExt;
        let answer = bytes::Bytes::from(vec![7u8; 3 * HTTP2_SLICE + 5]);
        let body = |timers: &ConnTimers| {
            let mut req = http::Request::new(());
            *req.version_mut() = http::Version::HTTP_2;
            let svc = InServiceLayer::new(timers.clone()).layer(tower::service_fn(
                |_: http::Request<()>| {
                    let full = http_body_util::Full::new(answer.clone());
                    std::future::ready(Ok::<_, std::convert::Infallible>(http::Response::new(full)))
                },
            ));
            async move { svc.oneshot(req).await.unwrap().into_body() }
        };
        // Taken whole: slices of the answer, in order, and nothing left waiting.
        let timers = conn_timers(60);
        let mut whole = body(&timers).await;
        let mut sizes = Vec::new();
        let mut got = Vec::new();
        while let Some(frame) = whole.frame().await {
            let data = frame.unwrap().into_data().unwrap();
            sizes.push(data.len());
            got.extend_from_slice(&data);
        }
        assert_eq!(sizes, [HTTP2_SLICE, HTTP2_SLICE, HTTP2_SLICE, 5]);
        assert!(got == answer && whole.is_end_stream());
        assert_eq!(timers.shared.waiting.load(Relaxed), 0);
        // One slice taken, the rest not: the connection's read fails.
        let (_client, server) = tokio::io::duplex(64);
        let mut io = timers.io(server);
        let mut stalled = body(&timers).await;
        let first = stalled.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!((first.len(), stalled.is_end_stream()), (HTTP2_SLICE, false));
        let started = Instant::now();
        let e = io.read(&mut [0u8; 8]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(secs_between(started.elapsed(), 60, 120));
        drop(stalled);
        assert_eq!(timers.shared.waiting.load(Relaxed), 0);
    }

    #[tokio::test]
    async fn a_request_is_in_service_until_its_answer_body_is_gone() {
        let timers = conn_timers(60);
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
