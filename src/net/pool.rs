//! Connections to one HTTP upstream, kept open between requests.
//!
//! toolgate talks to one origin per upstream, over HTTP/1, so a pool needs no key, no
//! connector stack and no race between a checkout and a connect. hyper-util's general pool
//! did all three on every request (three SipHash passes over the key, a `select` of two
//! futures, moves of large futures), and on a validated `tools/call` that was the largest
//! part of toolgate's own work after parsing.
//!
//! A connection is a hyper `SendRequest` in a short list. A request takes one that is ready,
//! sends on it and puts it back once its answer has all arrived: with the answer's head when
//! the body came with it (the common case), else when the body's end is read. Closed
//! connections are dropped when seen; idle ones close after [`IDLE_FOR`], found by the next
//! request or by a sweep. A request that finds nothing ready opens a connection, so the list
//! grows to the peak concurrency.
//!
//! An HTTP/1 connection's own work (writing the request, reading the answer) is done in the
//! task of the request that uses it ([`Conn`]), not in a task of its own: that task would be
//! woken and run two or three times per request, each a hand-off between worker threads.
//! While its answer's body still comes, the body carries the connection and drives it
//! ([`WireBody`]). The price: a connection nobody uses is not watched, so a server's close
//! is seen when the connection is next taken (nothing was sent on it yet: the request goes
//! on another) or by the sweep.
//!
//! The list is kept per thread slot ([`crate::thread_slot`]): a request takes from and puts
//! back to its own thread's list, and looks at the others' only when its own has nothing
//! ready. One list behind one lock would pass that lock's cache line between the worker
//! threads twice per request.
//!
//! A kept HTTP/1 connection also keeps the timer its requests' heads are timed on
//! ([`Deadline`]).
//!
//! Every connection holds a place among those the process holds to servers
//! ([`super::outbound`]) until it ends; a request that would open one past the bound is
//! refused unsent.
//!
//! Over TLS (`https://`, see [`super::tls`]) the server may choose HTTP/2 by ALPN.
//! An HTTP/2 connection carries every request at once, so it stays in the list while used:
//! a request takes a handle on it rather than the connection itself.

use crate::error::UpstreamError;
use crate::kept_timer::KeptTimer;
use crate::locks::MutexExt;
use crate::net::outbound::{Outbound, Place};
use crate::net::proxy::Route;
use crate::net::tls::TlsConnect;
use crate::thread_slot::{SLOTS, slot};
use bytes::Bytes;
use futures_util::FutureExt;
use http::{Request, Response};
use http_body::Body as _;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::client::conn::{TrySendError, http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Once, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Flow control of an HTTP/2 connection every client shares: what one stream may hold
/// unread, and what the whole connection may. A client that stops reading its answer stops
/// toolgate reading that stream, whose unread data then holds window; with the connection's
/// window at 256 streams' worth, a few slow readers (hyper's defaults let three take it all)
/// cannot stall every other client's call on the same connection. What is buffered stays
/// bounded by the streams' windows, not by the connection's.
const H2_STREAM_WINDOW: u32 = 256 * 1024;
const H2_CONNECTION_WINDOW: u32 = 256 * H2_STREAM_WINDOW;

/// How long an unused connection is kept.
const IDLE_FOR: Duration = Duration::from_secs(60);
/// A connect that takes longer is given up, whatever the request's own deadline.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// At most this many connections are kept per upstream; past it, a connection closes after
/// its answer. Split evenly between the thread slots in use.
const MAX_KEPT: usize = 1024;

/// The connections one thread slot may keep: [`MAX_KEPT`] over the slots the worker threads
/// use. A fixed share per slot starved a runtime with fewer threads than slots: on one core
/// at 256 concurrent requests, a share of 128 closed half the connections after each answer
/// and opened new ones, for 0.86x the forwarder's throughput and 1.30x its CPU
/// (docs/performance.md, "Connections kept per thread slot").
fn kept_per_slot() -> usize {
    let threads = tokio::runtime::Handle::try_current().map_or_else(
        |_| std::thread::available_parallelism().map_or(SLOTS, |n| n.get()),
        |rt| rt.metrics().num_workers(),
    );
    MAX_KEPT / threads.clamp(1, SLOTS)
}

/// One connection's request handle.
enum Sender {
    H1(http1::SendRequest<Full<Bytes>>),
    /// Shared by every request while it is open.
    H2(http2::SendRequest<Full<Bytes>>),
}

impl Sender {
    fn is_ready(&self) -> bool {
        match self {
            Sender::H1(tx) => tx.is_ready(),
            Sender::H2(tx) => tx.is_ready(),
        }
    }

    fn is_closed(&self) -> bool {
        match self {
            Sender::H1(tx) => tx.is_closed(),
            Sender::H2(tx) => tx.is_closed(),
        }
    }
}

/// An HTTP/1 connection's own work: writing its requests, reading their answers, seeing the
/// server close it. Polled by whoever waits on it ([`drive`]), never spawned.
struct Conn {
    work: Pin<Box<dyn Future<Output = Result<(), hyper::Error>> + Send>>,
    /// Its place among the connections the process holds, given back as it ends.
    place: Place,
    /// What `work` is polled with: a relay to the task driving it, while one does.
    relay: Arc<Relay>,
    waker: Waker,
}

/// Wakes the task that drives a connection, and none once the connection is kept.
///
/// Why: hyper leaves the waker of the connection's last poll in its request channel, on its
/// socket and in the answer body's channel. With the task's own waker there, the next
/// request's send, the server's close of an idle connection, or the reading of the body
/// would wake that task (another client's, as often as not, or the reader's own task from
/// inside its poll) for nothing. A connection put back disarms its relay.
#[derive(Default)]
struct Relay(futures_util::task::AtomicWaker);

impl std::task::Wake for Relay {
    fn wake(self: Arc<Self>) {
        self.0.wake();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.wake();
    }
}

impl Conn {
    fn new(
        work: impl Future<Output = Result<(), hyper::Error>> + Send + 'static,
        place: Place,
    ) -> Conn {
        let relay = Arc::new(Relay::default());
        Conn {
            work: Box::pin(work),
            place,
            waker: Waker::from(relay.clone()),
            relay,
        }
    }
}

/// Polls `conn` once for the task of `cx`; one that has ended is let go (what its request
/// was waiting for has already been told why by hyper).
fn drive(conn: &mut Option<Conn>, cx: &mut Context<'_>) {
    if let Some(c) = conn {
        c.relay.0.register(cx.waker());
        if let Poll::Ready(ended) = c.work.as_mut().poll(&mut Context::from_waker(&c.waker)) {
            if let Err(e) = ended {
                tracing::debug!(error = %e, "upstream connection ended");
            }
            *conn = None;
        }
    }
}

struct Kept {
    tx: Sender,
    /// `None` for HTTP/2, whose connection runs in a task of its own (every request shares it).
    conn: Option<Conn>,
    since: Instant,
    /// The timer of the requests it carried, for the next one (see [`Deadline`]).
    timer: Option<KeptTimer>,
}

pin_project_lite::pin_project! {
    /// An answer's head by a deadline: the head, or `None` once the deadline has passed,
    /// and the timer it was timed on, to be kept with the connection for its next request.
    struct Deadline<F> {
        #[pin]
        answer: F,
        deadline: tokio::time::Instant,
        timer: Option<KeptTimer>,
    }
}

impl<F> Deadline<F> {
    fn new(answer: F, deadline: tokio::time::Instant, timer: Option<KeptTimer>) -> Deadline<F> {
        Deadline {
            answer,
            deadline,
            timer,
        }
    }
}

impl<F: Future> Deadline<F> {
    /// The answer or the deadline; the answer polled without a waker when `quiet` (see
    /// [`poll_quietly`]).
    fn poll_by(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        quiet: bool,
    ) -> Poll<(Option<F::Output>, Option<KeptTimer>)> {
        let this = self.project();
        if let Poll::Ready(answer) = poll_quietly(this.answer, cx, quiet) {
            return Poll::Ready((Some(answer), this.timer.take()));
        }
        let deadline = *this.deadline;
        let timer = (this.timer).get_or_insert_with(|| KeptTimer::new(deadline));
        std::task::ready!(timer.poll_until(deadline, cx));
        Poll::Ready((None, this.timer.take()))
    }
}

/// Polls a request's answer, without a waker when `quiet`: while the request drives its
/// connection (the connection is still there after the drive), only that drive can make the
/// answer ready. With the task's waker, hyper's channel would wake the task from inside its
/// own poll, and the task would be polled again for nothing.
fn poll_quietly<F: Future>(f: Pin<&mut F>, cx: &mut Context<'_>, quiet: bool) -> Poll<F::Output> {
    if quiet {
        f.poll(&mut Context::from_waker(Waker::noop()))
    } else {
        f.poll(cx)
    }
}

/// A request's future, boxed.
type Sending<'p> =
    Pin<Box<dyn Future<Output = Result<Response<WireBody>, UpstreamError>> + Send + 'p>>;

pin_project_lite::pin_project! {
    /// A request sent: the common case, a kept HTTP/1 connection that took it, waits for the
    /// answer's head by the deadline and keeps the connection again; any other is boxed.
    ///
    /// Why by hand: `then` over [`Deadline`] and an either of the two would be a flatten, a
    /// map and two eithers, each a level that every poll of the request goes through.
    #[project = SentProj]
    enum Sent<'p, F> {
        OnKept {
            #[pin]
            sent: Deadline<F>,
            h1: Option<http1::SendRequest<Full<Bytes>>>,
            conn: Option<Conn>,
            pool: &'p Pool,
            deadline: tokio::time::Instant,
            wait: Duration,
        },
        /// A new connection, HTTP/2, or a kept connection the server had closed just now
        /// (nothing was sent, so the request goes again, on another connection or a new one).
        Boxed { sending: Sending<'p> },
    }
}

impl<F> Future for Sent<'_, F>
where
    F: Future<Output = Result<Response<Incoming>, TrySendError<Request<Full<Bytes>>>>>,
{
    type Output = Result<Response<WireBody>, UpstreamError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let sending = match self.as_mut().project() {
            SentProj::Boxed { sending } => return sending.as_mut().poll(cx),
            SentProj::OnKept {
                sent,
                h1,
                conn,
                pool,
                deadline,
                wait,
            } => match std::task::ready!({
                drive(conn, cx);
                sent.poll_by(cx, conn.is_some())
            }) {
                (Some(Ok(resp)), timer) => {
                    return Poll::Ready(Ok(match h1.take() {
                        Some(h1) => pool.answered(h1, conn.take(), timer, resp),
                        None => resp.map(WireBody::alone),
                    }));
                }
                // The connection goes with the request it still carries.
                (None, _) => return Poll::Ready(Err(UpstreamError::Timeout(*wait))),
                (Some(Err(mut e)), _) => match e.take_message() {
                    Some(back) => pool.send_by(None, back, *deadline, *wait),
                    None => return Poll::Ready(Err(classified(&e.into_error(), false))),
                },
            },
        };
        self.set(Sent::Boxed { sending });
        self.poll(cx)
    }
}

impl Kept {
    /// Closed, or idle for longer than `idle_for`. A connection still streaming an answer is
    /// not idle, however long ago it was taken.
    fn spent(&self, idle_for: Duration, now: Instant) -> bool {
        self.tx.is_closed()
            || (self.tx.is_ready() && now.saturating_duration_since(self.since) > idle_for)
    }
}

/// One thread slot's connections, on a cache line of its own.
#[repr(align(64))]
#[derive(Default)]
struct Shard(Mutex<Vec<Kept>>);

impl Shard {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Kept>> {
        self.0.locked()
    }
}

type Shards = [Shard; SLOTS];

pub struct Pool {
    /// `host:port`, as a connect resolves it.
    addr: String,
    /// For `https://` upstreams, and the origin HTTP/2 requests name (`https://host:port`).
    tls: Option<(TlsConnect, String)>,
    /// How every connection goes: directly or through a proxy.
    route: Route,
    kept: Arc<Shards>,
    idle_for: Duration,
    /// How many connections one thread slot keeps.
    per_slot: usize,
    /// The sweep starts with the first connection (a runtime is there by then).
    sweeping: Once,
    /// The connections every pool of the process holds together.
    outbound: Arc<Outbound>,
}

/// A failed exchange by its cause: a TLS refusal (the server's verdict on toolgate's
/// certificate comes after the handshake in TLS 1.3, with the first request) is a
/// configuration problem that retrying will not fix; anything else, an unreachable server.
/// `asked_for_certificate`: the exchange was the first on a connection whose server asked
/// for a client certificate, so a connection closed under it is that verdict, whether or
/// not the alert was read before the write failed.
fn classified(e: &hyper::Error, asked_for_certificate: bool) -> UpstreamError {
    let why = crate::error::with_causes(e);
    if tls_refused(e) || why.contains("received fatal alert") {
        UpstreamError::Untrusted(why)
    } else if asked_for_certificate {
        UpstreamError::Untrusted(format!(
            "{why} (the server asked for a client certificate and closed the connection before \
             answering: it refused the one upstream_tls.client_cert_file gives, or toolgate has none)"
        ))
    } else {
        UpstreamError::Unreachable(why)
    }
}

/// Whether a TLS error is in `e`'s chain, itself or inside an I/O error.
fn tls_refused(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur = Some(e);
    while let Some(c) = cur {
        let inner = c
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .map(|i| i as &(dyn std::error::Error + 'static));
        if c.is::<rustls::Error>() || inner.is_some_and(|i| i.is::<rustls::Error>()) {
            return true;
        }
        cur = c.source();
    }
    false
}

impl Pool {
    /// A pool for `addr`; with `tls`, every connection is TLS to `origin`.
    pub fn new(addr: String, tls: Option<(TlsConnect, String)>) -> Pool {
        Pool {
            addr,
            tls,
            route: Route::Direct,
            kept: Arc::default(),
            idle_for: IDLE_FOR,
            per_slot: kept_per_slot(),
            sweeping: Once::new(),
            outbound: Outbound::process().clone(),
        }
    }

    /// The same pool, its connections opened on `route`.
    pub fn through(self, route: Route) -> Pool {
        Pool { route, ..self }
    }

    /// The same pool, its connections counted in `outbound` rather than the process's.
    #[cfg(test)]
    fn bounded_by(self, outbound: Arc<Outbound>) -> Pool {
        Pool { outbound, ..self }
    }

    #[cfg(test)]
    fn with_idle(addr: String, idle_for: Duration) -> Pool {
        Pool {
            idle_for,
            ..Pool::new(addr, None)
        }
    }

    /// Sends `req` (origin-form URI, `Host` set) and waits for the answer's head until
    /// `started` + `wait`; `Err` says why there is none.
    ///
    /// A kept HTTP/1 connection, the common case, takes the request now, and the future only
    /// waits for the head, on the connection's own timer: it holds hyper's wait and the
    /// connection, not also the request and the general path's states, which every level
    /// above it would carry and copy. The rest (a new connection, HTTP/2, a kept connection
    /// the server closed) is boxed, and timed on a timer of its own.
    pub fn send(
        &self,
        req: Request<Full<Bytes>>,
        started: tokio::time::Instant,
        wait: Duration,
    ) -> impl Future<Output = Result<Response<WireBody>, UpstreamError>> + Send + '_ {
        let deadline = started + wait;
        // The request's own reading of the clock: idleness is counted in seconds.
        match self.take(started.into_std()) {
            Some(Kept {
                tx: Sender::H1(mut h1),
                conn,
                timer,
                ..
            }) => Sent::OnKept {
                sent: Deadline::new(h1.try_send_request(req), deadline, timer),
                h1: Some(h1),
                conn,
                pool: self,
                deadline,
                wait,
            },
            taken => Sent::Boxed {
                sending: self.send_by(taken, req, deadline, wait),
            },
        }
    }

    /// [`Self::send_on`] by `deadline`, boxed.
    fn send_by(
        &self,
        taken: Option<Kept>,
        req: Request<Full<Bytes>>,
        deadline: tokio::time::Instant,
        wait: Duration,
    ) -> Sending<'_> {
        Box::pin(
            tokio::time::timeout_at(deadline, self.send_on(taken, req))
                .map(move |sent| sent.unwrap_or_else(|_| Err(UpstreamError::Timeout(wait)))),
        )
    }

    /// [`Self::send`] on `taken` (a kept connection), else on another kept one or a new one.
    async fn send_on(
        &self,
        mut taken: Option<Kept>,
        mut req: Request<Full<Bytes>>,
    ) -> Result<Response<WireBody>, UpstreamError> {
        loop {
            let (kept, reused, asked_for_certificate) =
                match (taken.take()).or_else(|| self.take(Instant::now())) {
                    Some(kept) => (kept, true, false),
                    None => {
                        // Boxed: a TLS and HTTP/2 handshake's future is many times a request's.
                        let (kept, asked) = Box::pin(self.connect()).await?;
                        (kept, false, asked)
                    }
                };
            let Kept { tx, mut conn, .. } = kept;
            let mut failed = match tx {
                Sender::H1(mut h1) => {
                    let mut answer = std::pin::pin!(h1.try_send_request(req));
                    let sent = std::future::poll_fn(|cx| {
                        drive(&mut conn, cx);
                        poll_quietly(answer.as_mut(), cx, conn.is_some())
                    });
                    match sent.await {
                        Ok(resp) => return Ok(self.answered(h1, conn, None, resp)),
                        Err(e) => e,
                    }
                }
                Sender::H2(mut h2) => {
                    // HTTP/2 names the origin in the request (`:authority`), not in `Host`.
                    if let Some((_, origin)) = &self.tls {
                        let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
                        if let Ok(uri) = format!("{origin}{path}").parse() {
                            *req.uri_mut() = uri;
                        }
                        req.headers_mut().remove(http::header::HOST);
                    }
                    match h2.try_send_request(req).await {
                        Ok(resp) => return Ok(resp.map(WireBody::alone)),
                        Err(e) => e,
                    }
                }
            };
            match failed.take_message() {
                // As in `send`: nothing was sent on a kept connection the server closed.
                Some(back) if reused => req = back,
                _ => return Err(classified(&failed.into_error(), asked_for_certificate)),
            }
        }
    }

    /// An HTTP/1 answer, and the connection it came on: kept again now when the answer has
    /// all arrived (the common case: its body came with its head), else carried by the body,
    /// which drives it and keeps it again at the body's end. A connection that ended with
    /// the answer (`conn` is `None`) goes.
    fn answered(
        &self,
        h1: http1::SendRequest<Full<Bytes>>,
        conn: Option<Conn>,
        timer: Option<KeptTimer>,
        resp: Response<Incoming>,
    ) -> Response<WireBody> {
        let carried = match conn {
            Some(conn) if !h1.is_ready() => Some(Box::new(Mutex::new(Carried {
                h1,
                conn: Some(conn),
                timer,
                kept: self.kept.clone(),
                per_slot: self.per_slot,
            }))),
            Some(conn) => {
                keep(&self.kept, self.per_slot, Sender::H1(h1), Some(conn), timer);
                None
            }
            None => None,
        };
        resp.map(|body| WireBody { body, carried })
    }

    /// A ready connection, this thread's first; closed and expired ones go.
    fn take(&self, now: Instant) -> Option<Kept> {
        let me = slot();
        (0..SLOTS).find_map(|i| self.take_from(&self.kept[(me + i) % SLOTS], now))
    }

    /// The most recently used ready connection of one list (a handle on it, for HTTP/2).
    fn take_from(&self, shard: &Shard, now: Instant) -> Option<Kept> {
        let mut kept = shard.lock();
        let mut i = kept.len();
        while i > 0 {
            i -= 1;
            let k = &mut kept[i];
            if k.spent(self.idle_for, now) {
                kept.swap_remove(i);
            } else if let Sender::H2(h2) = &k.tx
                && h2.is_ready()
            {
                k.since = now;
                return Some(Kept {
                    tx: Sender::H2(h2.clone()),
                    conn: None,
                    since: now,
                    timer: None,
                });
            } else if k.tx.is_ready() {
                return Some(kept.swap_remove(i));
            }
        }
        None
    }

    /// A new connection, and whether its server asked for a client certificate.
    async fn connect(&self) -> Result<(Kept, bool), UpstreamError> {
        let place = self.outbound.take()?;
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, self.open())
            .await
            .map_err(|_| self.unreachable(format!("no connection within {CONNECT_TIMEOUT:?}")))??;
        let mut asked_for_certificate = false;
        let (tx, conn) = match &self.tls {
            None => handshake_h1(TokioIo::new(stream), place)
                .await
                .map_err(|e| self.unreachable(e))?,
            Some((tls, _)) => {
                let c = tls.connect(stream).await.map_err(|why| {
                    UpstreamError::Untrusted(format!("connecting to {}: {why}", self.addr))
                })?;
                asked_for_certificate = c.asked_for_certificate;
                let io = TokioIo::new(c.stream);
                if c.h2 {
                    let (tx, conn) = http2::Builder::new(TokioExecutor::new())
                        .initial_stream_window_size(H2_STREAM_WINDOW)
                        .initial_connection_window_size(H2_CONNECTION_WINDOW)
                        .handshake(io)
                        .await
                        .map_err(|e| self.unreachable(e))?;
                    tokio::spawn(async move {
                        let _place = place;
                        if let Err(e) = conn.await {
                            tracing::debug!(error = %e, "upstream connection ended");
                        }
                    });
                    // Shared from the start: other requests may use it while this one does.
                    keep(
                        &self.kept,
                        self.per_slot,
                        Sender::H2(tx.clone()),
                        None,
                        None,
                    );
                    (Sender::H2(tx), None)
                } else {
                    handshake_h1(io, place)
                        .await
                        .map_err(|e| self.unreachable(e))?
                }
            }
        };
        self.sweeping.call_once(|| self.sweep());
        let kept = Kept {
            tx,
            conn,
            since: Instant::now(),
            timer: None,
        };
        Ok((kept, asked_for_certificate))
    }

    /// A TCP stream to the server, directly or through the proxy.
    async fn open(&self) -> Result<tokio::net::TcpStream, UpstreamError> {
        (self.route.connect(&self.addr).await).map_err(|e| self.unreachable(e))
    }

    fn unreachable(&self, why: impl std::fmt::Display) -> UpstreamError {
        UpstreamError::Unreachable(format!("connecting to {}: {why}", self.addr))
    }

    /// Closes idle connections when no request comes to find them; ends with the pool.
    fn sweep(&self) {
        let kept = Arc::downgrade(&self.kept);
        let idle_for = self.idle_for;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(idle_for / 2).await;
                let Some(kept) = kept.upgrade() else { return };
                let now = Instant::now();
                for shard in kept.iter() {
                    shard.lock().retain_mut(|k| {
                        // Without a waker: a close is seen by the next sweep or request.
                        drive(&mut k.conn, &mut Context::from_waker(Waker::noop()));
                        !k.spent(idle_for, now)
                    });
                }
            }
        });
    }
}

/// An HTTP/1 connection over `io`: its request handle, and its own work, to be driven by
/// the requests that use it.
async fn handshake_h1<T>(io: T, place: Place) -> Result<(Sender, Option<Conn>), hyper::Error>
where
    T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (tx, conn) = http1::handshake(io).await?;
    Ok((Sender::H1(tx), Some(Conn::new(conn, place))))
}

/// Puts a connection in this thread's list, unless the list is full or the process holds
/// too many connections to keep one more idle ([`Place::keepable`]): then it closes. An
/// HTTP/1 connection's [`Relay`] is disarmed first.
fn keep(kept: &Shards, per_slot: usize, tx: Sender, conn: Option<Conn>, timer: Option<KeptTimer>) {
    if let Some(c) = &conn {
        if !c.place.keepable() {
            return;
        }
        c.relay.0.take();
    }
    let mut list = kept[slot()].lock();
    if list.len() < per_slot {
        list.push(Kept {
            tx,
            conn,
            since: Instant::now(),
            timer,
        });
    }
}

/// An HTTP/1 connection whose answer's body still comes, carried by that body.
struct Carried {
    h1: http1::SendRequest<Full<Bytes>>,
    conn: Option<Conn>,
    timer: Option<KeptTimer>,
    /// Where it goes back to.
    kept: Arc<Shards>,
    per_slot: usize,
}

impl Carried {
    /// The body has ended: the connection is kept again once it is ready for the next
    /// request (one more poll takes it there, when the body's end did not).
    fn release(mut self, cx: &mut Context<'_>) {
        if !self.h1.is_ready() {
            drive(&mut self.conn, cx);
        }
        if self.conn.is_some() && self.h1.is_ready() {
            let tx = Sender::H1(self.h1);
            keep(&self.kept, self.per_slot, tx, self.conn, self.timer);
        }
    }
}

/// An upstream answer's body as the network gives it; with, while it still comes over
/// HTTP/1, the connection it comes on, which each poll of the body drives. A body dropped
/// before its end closes that connection (what is left of the answer is not read).
pub(crate) struct WireBody {
    body: Incoming,
    /// Behind a mutex only to be `Sync` like `Incoming`: used through `get_mut`, never locked.
    carried: Option<Box<Mutex<Carried>>>,
}

impl WireBody {
    /// A body whose connection is not carried (HTTP/2's, or one kept already).
    fn alone(body: Incoming) -> WireBody {
        WireBody {
            body,
            carried: None,
        }
    }

    fn release(&mut self, cx: &mut Context<'_>) {
        if let Some(carried) = self.carried.take() {
            carried
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .release(cx);
        }
    }
}

impl std::fmt::Debug for WireBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WireBody")
            .field("body", &self.body)
            .field("carries_its_connection", &self.carried.is_some())
            .finish()
    }
}

impl http_body::Body for WireBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        let mut frame = Pin::new(&mut this.body).poll_frame(cx);
        let Some(carried) = &mut this.carried else {
            return frame;
        };
        if frame.is_pending() {
            let carried = carried.get_mut().unwrap_or_else(PoisonError::into_inner);
            drive(&mut carried.conn, cx);
            frame = Pin::new(&mut this.body).poll_frame(cx);
        }
        match &frame {
            Poll::Ready(None) => this.release(cx),
            Poll::Ready(Some(Ok(_))) if this.body.is_end_stream() => this.release(cx),
            // The connection broke under the body.
            Poll::Ready(Some(Err(_))) => this.carried = None,
            _ => {}
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for WireBody {
    /// A body read to its end by its size, not by a last poll, still gives its connection back.
    fn drop(&mut self) {
        if self.carried.is_some() && self.body.is_end_stream() {
            self.release(&mut Context::from_waker(Waker::noop()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn request() -> Request<Full<Bytes>> {
        Request::builder()
            .uri("/mcp")
            .header(http::header::HOST, "x")
            .body(Full::new(Bytes::from_static(b"{}")))
            .unwrap()
    }

    /// A server answering each request on a connection, then closing it after `per_conn`
    /// answers; with `slow`, the last byte of each body on the first connection comes 300 ms
    /// after the rest.
    /// Returns its address and a count of the connections it accepted.
    async fn server(
        per_conn: usize,
        slow: bool,
    ) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                let first = count.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0;
                let slow = slow && first;
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    for _ in 0..per_conn {
                        let mut got = Vec::new();
                        // Head and the two-byte body.
                        while !got.windows(6).any(|w| w == b"\r\n\r\n{}") {
                            match s.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => got.extend_from_slice(&buf[..n]),
                            }
                        }
                        let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                        let (now, later) = answer.split_at(answer.len() - usize::from(slow));
                        if s.write_all(now).await.is_err() {
                            return;
                        }
                        if slow {
                            tokio::time::sleep(Duration::from_millis(300)).await;
                        }
                        if s.write_all(later).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (addr, accepted)
    }

    const WAIT: Duration = Duration::from_secs(10);

    /// A request sent on `pool`, its head awaited for at most `wait`.
    fn sent(
        pool: &Pool,
        wait: Duration,
    ) -> impl Future<Output = Result<Response<WireBody>, UpstreamError>> + '_ {
        pool.send(request(), tokio::time::Instant::now(), wait)
    }

    async fn body(resp: Response<WireBody>) -> Bytes {
        use http_body_util::BodyExt;
        resp.into_body().collect().await.unwrap().to_bytes()
    }

    #[tokio::test]
    async fn one_connection_serves_calls_in_turn() {
        let (addr, accepted) = server(usize::MAX, false).await;
        let pool = Pool::new(addr, None);
        for _ in 0..20 {
            let resp = sent(&pool, WAIT).await.unwrap();
            assert_eq!(body(resp).await, "ok");
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_connection_still_streaming_is_not_shared() {
        let (addr, accepted) = server(usize::MAX, true).await;
        let pool = Pool::new(addr, None);
        let first = sent(&pool, WAIT).await.unwrap();
        // The first answer's body is still coming: its connection is busy.
        let second = sent(&pool, WAIT).await.unwrap();
        assert_eq!(body(second).await, "ok");
        assert_eq!(body(first).await, "ok");
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    /// One worker thread (a toolgate on one core) keeps what its peak concurrency needs, up to
    /// the whole per-upstream allowance, instead of one slot's share of it.
    #[tokio::test]
    async fn one_thread_keeps_every_connection_its_concurrency_needs() {
        let (addr, accepted) = server(usize::MAX, false).await;
        // Past the process's bound where its descriptor limit is the usual 1024.
        let unbounded = Arc::new(Outbound::at_most(usize::MAX));
        let pool = Pool::new(addr, None).bounded_by(unbounded);
        assert_eq!(
            pool.per_slot, MAX_KEPT,
            "a one-thread runtime keeps the whole allowance"
        );
        let concurrent = 300;
        for _ in 0..3 {
            let answers = (0..concurrent).map(|_| async {
                let resp = sent(&pool, WAIT).await.unwrap();
                assert_eq!(body(resp).await, "ok");
            });
            futures_util::future::join_all(answers).await;
        }
        // Each round finds the last round's connections ready: none opened after the first.
        assert!(accepted.load(std::sync::atomic::Ordering::SeqCst) <= concurrent);
    }

    /// A request that would open a connection past the bound is refused unsent; one that
    /// finds a kept connection needs no place, and a connection that ends gives its back.
    #[tokio::test]
    async fn connections_past_the_bound_are_refused_unsent() {
        let (addr, accepted) = server(2, true).await;
        let outbound = Arc::new(Outbound::at_most(1));
        let pool = Pool::new(addr, None).bounded_by(outbound.clone());
        // The first answer's body is still coming: its connection is busy.
        let first = sent(&pool, WAIT).await.unwrap();
        let refused = sent(&pool, WAIT).await.unwrap_err();
        assert_eq!(refused.kind(), "busy", "{refused}");
        assert_eq!(body(first).await, "ok");
        assert_eq!(outbound.open(), 1, "kept, it holds its place");
        let again = sent(&pool, WAIT).await.unwrap();
        assert_eq!(body(again).await, "ok");
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
        // The server closes it after its second answer: its place comes back.
        let mut freed = false;
        for _ in 0..100 {
            let resp = sent(&pool, WAIT).await;
            if let Ok(r) = resp {
                assert_eq!(body(r).await, "ok");
                freed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(freed, "a connection the server closed gave its place back");
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    /// What one server's burst leaves idle keeps at most three quarters of the places: the
    /// rest is there for another server's requests.
    #[tokio::test]
    async fn idle_connections_leave_a_quarter_of_the_places_to_other_servers() {
        let (addr, accepted) = server(usize::MAX, true).await;
        let outbound = Arc::new(Outbound::at_most(4));
        let burst = Pool::new(addr.clone(), None).bounded_by(outbound.clone());
        // Four at once: the first answer's body is slow, so none finds another's connection.
        let heads = futures_util::future::join_all((0..4).map(|_| sent(&burst, WAIT))).await;
        for head in heads {
            assert_eq!(body(head.unwrap()).await, "ok");
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 4);
        assert_eq!(
            outbound.open(),
            3,
            "one closed after its answer rather than kept"
        );
        let other = Pool::new(addr, None).bounded_by(outbound.clone());
        assert_eq!(body(sent(&other, WAIT).await.unwrap()).await, "ok");
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_is_replaced() {
        let (addr, accepted) = server(1, false).await;
        let pool = Pool::new(addr, None);
        for _ in 0..5 {
            let resp = sent(&pool, WAIT).await.unwrap();
            assert_eq!(body(resp).await, "ok");
            // Let the connection see the server's close.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 5);
    }

    #[tokio::test]
    async fn idle_connections_close_and_busy_ones_come_back() {
        let (addr, accepted) = server(usize::MAX, true).await;
        let pool = Pool::with_idle(addr, Duration::from_millis(50));
        let streaming = sent(&pool, WAIT).await.unwrap();
        let idle = sent(&pool, WAIT).await.unwrap();
        assert_eq!(body(idle).await, "ok");
        let listed = |pool: &Pool| pool.kept.iter().map(|s| s.lock().len()).sum::<usize>();
        // Past two sweeps: the idle connection is gone; the one mid-answer is its body's.
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert_eq!(listed(&pool), 0);
        assert_eq!(body(streaming).await, "ok");
        assert_eq!(listed(&pool), 1, "kept again at its body's end");
        assert_eq!(body(sent(&pool, WAIT).await.unwrap()).await, "ok");
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    /// A body dropped before its end takes its connection with it: the next request opens
    /// another, and is answered.
    #[tokio::test]
    async fn a_body_dropped_before_its_end_closes_its_connection() {
        let (addr, accepted) = server(usize::MAX, true).await;
        let pool = Pool::new(addr, None);
        drop(sent(&pool, WAIT).await.unwrap());
        assert_eq!(body(sent(&pool, WAIT).await.unwrap()).await, "ok");
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    /// Counts the wakes a task gets.
    struct Wakes(std::sync::atomic::AtomicUsize);

    impl std::task::Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// A server that answers one request per connection and closes it `after` its answer.
    async fn closing_later(
        after: Duration,
    ) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tokio::spawn(async move {
                    let (mut buf, mut got) = (vec![0u8; 4096], Vec::new());
                    while !got.windows(6).any(|w| w == b"\r\n\r\n{}") {
                        match s.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => got.extend_from_slice(&buf[..n]),
                        }
                    }
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    let _ = s.write_all(answer).await;
                    tokio::time::sleep(after).await;
                });
            }
        });
        (addr, accepted)
    }

    /// A connection back in its list wakes no task that used it: not when that task reads
    /// the answer's body (which hyper's body channel would), not when the server closes it;
    /// and the next request finds the close and goes on a new connection.
    #[tokio::test]
    async fn a_kept_connection_wakes_no_task_that_used_it() {
        let (addr, accepted) = closing_later(Duration::from_millis(50)).await;
        let pool = Pool::new(addr, None);
        let wakes = Arc::new(Wakes(std::sync::atomic::AtomicUsize::new(0)));
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        let woken = || wakes.0.load(std::sync::atomic::Ordering::SeqCst);
        let mut answer = std::pin::pin!(sent(&pool, WAIT));
        let resp = loop {
            if let Poll::Ready(resp) = answer.as_mut().poll(&mut cx) {
                break resp.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let before = woken();
        let mut body = resp.into_body();
        let frame = Pin::new(&mut body).poll_frame(&mut cx);
        assert!(
            matches!(&frame, Poll::Ready(Some(Ok(f))) if f.data_ref().is_some_and(|d| d == "ok")),
            "{frame:?}"
        );
        assert_eq!(woken(), before, "reading the answer woke the task");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(woken(), before, "the server's close woke the task");
        assert_eq!(self::body(sent(&pool, WAIT).await.unwrap()).await, "ok");
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_refused_connect_says_where() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        drop(listener);
        let err = sent(&Pool::new(addr.clone(), None), WAIT)
            .await
            .unwrap_err();
        assert!(
            matches!(&err, UpstreamError::Unreachable(why) if why.starts_with(&format!("connecting to {addr}: "))),
            "{err}"
        );
    }

    /// A server on one connection that answers its requests in turn, each after its delay
    /// (`None`: never).
    async fn answering_after(delays: Vec<Option<Duration>>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 4096];
            for delay in delays {
                let mut got = Vec::new();
                while !got.windows(6).any(|w| w == b"\r\n\r\n{}") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let Some(delay) = delay else {
                    // Holds the connection without answering until the client gives up.
                    let _ = s.read(&mut buf).await;
                    return;
                };
                tokio::time::sleep(delay).await;
                let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                if s.write_all(answer).await.is_err() {
                    return;
                }
            }
        });
        addr
    }

    fn kept_timers(pool: &Pool) -> usize {
        let shards = pool.kept.iter().map(|s| s.lock());
        shards
            .map(|k| k.iter().filter(|k| k.timer.is_some()).count())
            .sum()
    }

    /// A kept connection's timer holds each request to its own deadline: one later than the
    /// timer's (an answer after the last request's deadline is still taken), one past a
    /// timer that fired while kept, and an earlier one (a shorter wait is held to).
    #[tokio::test]
    async fn a_kept_connection_times_each_head_on_its_own_timer() {
        let ms = |n| Some(Duration::from_millis(n));
        let addr = answering_after(vec![ms(20), ms(20), ms(300), ms(20), ms(20), None]).await;
        let pool = Pool::new(addr, None);
        let (short, shorter) = (Duration::from_millis(200), Duration::from_millis(100));
        assert_eq!(body(sent(&pool, WAIT).await.unwrap()).await, "ok");
        assert_eq!(body(sent(&pool, short).await.unwrap()).await, "ok");
        assert_eq!(kept_timers(&pool), 1, "kept with its connection");
        // Answered after the last request's deadline, on the same timer.
        assert_eq!(body(sent(&pool, WAIT).await.unwrap()).await, "ok");
        // The timer fires while kept; the next request is timed on it all the same.
        assert_eq!(body(sent(&pool, shorter).await.unwrap()).await, "ok");
        tokio::time::sleep(Duration::from_millis(250)).await;
        assert_eq!(body(sent(&pool, WAIT).await.unwrap()).await, "ok");
        let started = tokio::time::Instant::now();
        let late = sent(&pool, shorter).await.unwrap_err();
        assert!(
            matches!(late, UpstreamError::Timeout(d) if d == shorter),
            "{late}"
        );
        let took = started.elapsed();
        assert!(took >= shorter && took < Duration::from_secs(2), "{took:?}");
    }
}
