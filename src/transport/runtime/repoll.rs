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
//! to do.

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
        for _ in 0..MAX_POLLS {
            this.state.flag.store(POLLING, SeqCst);
            if let Poll::Ready(out) = this.inner.as_mut().poll(&mut inner_cx) {
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
