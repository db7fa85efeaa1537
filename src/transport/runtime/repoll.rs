//! A connection task that wakes itself while it runs is polled again at once, instead of
//! being requeued by the scheduler.
//!
//! Why: hyper's HTTP/1 server wakes its connection task from inside that task's own poll.
//! When the service takes the request body from hyper's channel, the channel wakes the
//! waker hyper left there while sending the body, and that is the running task's. Tokio
//! treats a wake during a poll as a yield: the task goes to the back of the run queue and,
//! on the multi-threaded scheduler, an idle worker is woken with a futex to come and steal
//! it. That is a futex wake, a futex wait and a thread hop per request, measured with
//! `strace -c`; a bare forwarder never reads the body in its service and pays none of it.
//! Polled again here, on the same thread, the task finds at once whether anything is left
//! to do. Where the body taken was its last frame there is nothing, and such a wake is held
//! back altogether ([`crate::self_wake`]): the task is polled once for a request's head and
//! body, not twice.

use futures_util::task::AtomicWaker;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering::SeqCst};
use std::task::{Context, Poll, Wake, Waker};

/// More polls in a row than this and the task yields to the scheduler after all, so a
/// connection that keeps waking itself cannot starve the others on its thread.
const MAX_POLLS: usize = 4;

const IDLE: u8 = 0;
const POLLING: u8 = 1;
const WOKEN: u8 = 2;

/// Wraps a future (a connection) so that wakes during its own poll re-poll it in place.
pub struct Repoll<F> {
    inner: Pin<Box<F>>,
    state: Arc<State>,
    waker: Waker,
}

struct State {
    /// `IDLE`, `POLLING`, or `WOKEN` (woken while polling).
    flag: AtomicU8,
    /// The scheduler's waker, for wakes that come while the future is not running.
    task: AtomicWaker,
}

impl Wake for State {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // A body read to its end in the future's own poll asks nothing of it (`self_wake`).
        if crate::self_wake::held_back(Arc::as_ptr(self) as usize) {
            return;
        }
        // While the future runs, a wake only marks it for another poll; otherwise it goes
        // to the scheduler. The exchange decides which, so no wake falls between the two.
        match self.flag.compare_exchange(POLLING, WOKEN, SeqCst, SeqCst) {
            Ok(_) => {}
            Err(WOKEN) => {}
            Err(_) => self.task.wake(),
        }
    }
}

impl<F: Future> Repoll<F> {
    pub fn new(inner: F) -> Repoll<F> {
        let state = Arc::new(State {
            flag: AtomicU8::new(IDLE),
            task: AtomicWaker::new(),
        });
        Repoll {
            inner: Box::pin(inner),
            waker: Waker::from(state.clone()),
            state,
        }
    }
}

impl<F: Future> Future for Repoll<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = &mut *self;
        this.state.task.register(cx.waker());
        let mut inner_cx = Context::from_waker(&this.waker);
        let task = Arc::as_ptr(&this.state) as usize;
        for _ in 0..MAX_POLLS {
            this.state.flag.store(POLLING, SeqCst);
            let polled =
                crate::self_wake::running(task, || this.inner.as_mut().poll(&mut inner_cx));
            if let Poll::Ready(out) = polled {
                this.state.flag.store(IDLE, SeqCst);
                return Poll::Ready(out);
            }
            if this
                .state
                .flag
                .compare_exchange(POLLING, IDLE, SeqCst, SeqCst)
                .is_ok()
            {
                return Poll::Pending;
            }
        }
        this.state.flag.store(IDLE, SeqCst);
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Wakes itself on each of its first `wakes` polls, then is ready.
    struct SelfWaking {
        wakes: usize,
        polls: Arc<AtomicUsize>,
    }

    impl Future for SelfWaking {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, SeqCst);
            if self.wakes == 0 {
                return Poll::Ready(());
            }
            self.wakes -= 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    /// Counts the wakes that reach the scheduler.
    struct Counting(AtomicUsize);

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, SeqCst);
        }
    }

    fn poll_once<F: Future>(f: &mut Pin<Box<Repoll<F>>>, outer: &Arc<Counting>) -> Poll<F::Output> {
        let waker = Waker::from(outer.clone());
        f.as_mut().poll(&mut Context::from_waker(&waker))
    }

    #[test]
    fn a_wake_during_its_own_poll_polls_again_in_place() {
        let polls = Arc::new(AtomicUsize::new(0));
        let outer = Arc::new(Counting(AtomicUsize::new(0)));
        let mut f = Box::pin(Repoll::new(SelfWaking {
            wakes: 1,
            polls: polls.clone(),
        }));
        assert!(poll_once(&mut f, &outer).is_ready());
        assert_eq!(polls.load(SeqCst), 2);
        assert_eq!(outer.0.load(SeqCst), 0, "the scheduler saw no wake");
    }

    #[test]
    fn a_future_that_keeps_waking_itself_yields_to_the_scheduler() {
        let polls = Arc::new(AtomicUsize::new(0));
        let outer = Arc::new(Counting(AtomicUsize::new(0)));
        let mut f = Box::pin(Repoll::new(SelfWaking {
            wakes: 100,
            polls: polls.clone(),
        }));
        assert!(poll_once(&mut f, &outer).is_pending());
        assert_eq!(polls.load(SeqCst), MAX_POLLS);
        assert_eq!(outer.0.load(SeqCst), 1, "it asked to be run again later");
    }

    #[test]
    fn a_wake_while_it_waits_reaches_the_scheduler() {
        let outer = Arc::new(Counting(AtomicUsize::new(0)));
        let (tx, rx) = tokio::sync::oneshot::channel::<u8>();
        let mut f = Box::pin(Repoll::new(rx));
        assert!(poll_once(&mut f, &outer).is_pending());
        tx.send(7).unwrap();
        assert_eq!(outer.0.load(SeqCst), 1);
        assert!(matches!(poll_once(&mut f, &outer), Poll::Ready(Ok(7))));
    }

    /// Serves `request` on one hyper HTTP/1 connection re-polled in place, whose service
    /// reads the body whole and then waits a moment, as for a server's answer; the answer
    /// says how often the service's future was polled.
    async fn service_polls(request: &'static [u8]) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut client, server) = tokio::io::duplex(4096);
        let service = hyper::service::service_fn(|req: http::Request<hyper::body::Incoming>| {
            let polls = Arc::new(AtomicUsize::new(0));
            let mut read = Box::pin(async move {
                let body = crate::net::body::read_limited(req.into_body(), 1024).await;
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                body
            });
            std::future::poll_fn(move |cx| {
                let n = polls.fetch_add(1, SeqCst) + 1;
                read.as_mut().poll(cx).map(|body| {
                    let answer = format!("{} bytes, {n} polls", body.unwrap().len());
                    Ok::<_, std::convert::Infallible>(http::Response::new(
                        http_body_util::Full::new(bytes::Bytes::from(answer)),
                    ))
                })
            })
        });
        let conn = hyper::server::conn::http1::Builder::new()
            .serve_connection(hyper_util::rt::TokioIo::new(server), service);
        let conn = tokio::spawn(Repoll::new(conn));
        client.write_all(request).await.unwrap();
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        conn.await.unwrap().unwrap();
        answer.rsplit("\r\n").next().unwrap().to_owned()
    }

    #[tokio::test]
    async fn a_body_read_to_its_end_polls_the_service_no_more_for_it() {
        // hyper wakes the connection's task as the service takes the body's one frame; read
        // to its end, the body needs nothing more, and the task is not polled again for it:
        // once for the request, once for the wait's end.
        let request =
            b"POST / HTTP/1.1\r\nhost: x\r\nconnection: close\r\ncontent-length: 5\r\n\r\nhello";
        assert_eq!(service_polls(request).await, "5 bytes, 2 polls");
    }

    #[tokio::test]
    async fn a_body_in_chunks_is_still_read_to_its_end() {
        // Each frame taken before the last wakes the task to read the next one.
        let request = b"POST / HTTP/1.1\r\nhost: x\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n\
                        2\r\nhe\r\n3\r\nllo\r\n0\r\n\r\n";
        assert!(service_polls(request).await.starts_with("5 bytes, "));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wakes_from_other_threads_are_never_lost() {
        // A channel fed from another thread while the receiver is being polled: every
        // message arrives, whatever the interleaving of wakes and polls.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<u32>(1);
        let feeder = std::thread::spawn(move || {
            for i in 0..20_000 {
                tx.blocking_send(i).unwrap();
            }
        });
        let sum = tokio::spawn(Repoll::new(async move {
            let mut sum = 0u64;
            while let Some(i) = rx.recv().await {
                sum += u64::from(i);
            }
            sum
        }));
        let sum = tokio::time::timeout(std::time::Duration::from_secs(30), sum)
            .await
            .expect("no lost wake")
            .unwrap();
        feeder.join().unwrap();
        assert_eq!(sum, (0..20_000u64).sum::<u64>());
    }
}
