//! A timer of the runtime's kept across waits: a connection's, reused for each of its
//! requests (the client side's idle and head deadlines, an upstream answer's deadline).
//!
//! Why: a new timer is registered with the runtime's timer wheel under a lock when first
//! awaited and taken out under it when dropped, about 0.8k instructions per request; moving
//! a kept one to each request's deadline still cost about 0.15k. A kept timer is moved only
//! when a deadline comes earlier than the one it is set to: a later one is left for the
//! timer to find when it fires, and the timer is moved then. And a poll hands the timer the
//! task's waker again, about 0.1k: while the timer holds the waker of the task that waits,
//! whether it fired is one load.
//!
//! Caveat: a timer left at an earlier deadline wakes the task that last waited on it when
//! that deadline comes, once, to no effect but one more poll.

use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use tokio::time::{Instant, Sleep};

pub(crate) struct KeptTimer {
    sleep: Pin<Box<Sleep>>,
    /// The waker the last poll left with the timer, until it fires or is moved.
    holds: Option<Waker>,
}

impl KeptTimer {
    pub(crate) fn new(deadline: Instant) -> KeptTimer {
        KeptTimer {
            sleep: Box::pin(tokio::time::sleep_until(deadline)),
            holds: None,
        }
    }

    /// Ready once `deadline` has passed; until then the task of `cx` is woken by then.
    pub(crate) fn poll_until(&mut self, deadline: Instant, cx: &mut Context<'_>) -> Poll<()> {
        if deadline < self.sleep.deadline() {
            self.reset(deadline);
        }
        while self.fired(cx) {
            if Instant::now() >= deadline {
                return Poll::Ready(());
            }
            // An earlier wait's deadline.
            self.reset(deadline);
        }
        Poll::Pending
    }

    /// Whether the timer fired; if not, it wakes the task of `cx` when it does.
    fn fired(&mut self, cx: &mut Context<'_>) -> bool {
        if self.holds.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            return self.sleep.is_elapsed();
        }
        // Outside the task's budget: a `Sleep` polled once the budget is spent is `Pending`
        // without taking the waker, and the timer, taken for holding it, would never wake
        // the task (a connection that wrote many times in one poll waited forever so).
        let sleep = &mut self.sleep;
        let mut poll =
            tokio::task::coop::unconstrained(std::future::poll_fn(|cx| sleep.as_mut().poll(cx)));
        let fired = Pin::new(&mut poll).poll(cx).is_ready();
        self.holds = (!fired).then(|| cx.waker().clone());
        fired
    }

    fn reset(&mut self, deadline: Instant) {
        self.sleep.as_mut().reset(deadline);
        self.holds = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::poll_fn;
    use std::time::Duration;

    /// A wait begun by a task whose budget is spent (a connection that wrote many times in
    /// one poll) is woken at its deadline all the same.
    #[tokio::test(start_paused = true)]
    async fn a_wait_begun_with_the_budget_spent_is_woken_at_its_deadline() {
        let deadline = Instant::now() + Duration::from_secs(1);
        let mut timer = KeptTimer::new(deadline);
        poll_fn(|cx| {
            while tokio::task::coop::has_budget_remaining() {
                let spend = std::pin::pin!(tokio::task::coop::consume_budget());
                let _ = spend.poll(cx);
            }
            assert!(timer.poll_until(deadline, cx).is_pending());
            Poll::Ready(())
        })
        .await;
        let waited = poll_fn(|cx| timer.poll_until(deadline, cx));
        let woken = tokio::time::timeout(Duration::from_secs(5), waited).await;
        assert!(woken.is_ok(), "woken at the deadline, not left waiting");
    }
}
