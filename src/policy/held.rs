//! How many bytes toolgate holds for requests at once, every client's together
//! (`limits.max_request_bytes_in_flight`): the bodies the HTTP front reads, and the answers
//! of every kind of server, read whole for the rules or read as a child's line.
//!
//! `limits.max_body_bytes` and `limits.max_response_bytes` bound one message, but a client
//! sends many requests at once: up to 200 on one HTTP/2 connection, one on each of thousands
//! of HTTP/1.1 connections. A body is held from its first byte until its request is
//! answered, and an answer from when it is read until it has gone to its client, so a client
//! that starts large bodies and never finishes them, or asks for large answers and never
//! reads them, would make toolgate hold gigabytes (880 MiB from one HTTP/2 connection). A
//! body is counted as it comes, so that only bytes sent hold room; with no room, its request
//! is refused (503), before any of it is read when it declares more than the room left. An
//! answer, which came and must not be lost, waits where it is (in the server's socket, in a
//! child's pipe); what is already held is never dropped.
//!
//! Two counts for the process, one of bodies and one of answers, each to the bound: an
//! answer never waits for room its own request's body holds (requests whose bodies fill the
//! budget would otherwise wait for their answers until they time out). Both are kept across
//! reloads (a reload may change the bound). A share costs an atomic operation per frame it
//! counts (most bodies and answers come in one) and one more when it is given back, on the
//! thread that holds it: no lock (`edge::message::read`,
//! `exchange::answers` and `upstream::child::read_line` say how each share is sized). Only
//! what waits takes the lock of the waiting answers.
//!
//! A share given back wakes, oldest first, the waiting answers it has room for, and no other:
//! each woken answer is a task polled, and waking every one of them made each share given
//! back cost about a microsecond of CPU per answer waiting (docs/security.md). One too large
//! for the room is passed over, so a small answer never waits behind a large one that does
//! not fit; the large one waits until there is room for it or its caller gives up.

use crate::locks::MutexExt;
use bytes::Bytes;
use std::collections::VecDeque;
use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

#[derive(Debug)]
pub(crate) struct ByteBudget {
    held: AtomicUsize,
    max: AtomicUsize,
    /// Answers waiting for room ([`ByteBudget::room_for`]); a share given back takes the
    /// queue's lock only when there are some.
    waiting: AtomicUsize,
    queue: Mutex<Queue>,
}

impl ByteBudget {
    pub(crate) fn new(max: usize) -> ByteBudget {
        ByteBudget {
            held: AtomicUsize::new(0),
            max: AtomicUsize::new(max),
            waiting: AtomicUsize::new(0),
            queue: Mutex::default(),
        }
    }

    /// A reload's bound: shares already taken stay held.
    pub(crate) fn set_max(&self, max: usize) {
        self.max.store(max, Ordering::Relaxed);
        self.wake_those_it_has_room_for();
    }

    /// Bytes held now, for the gauge.
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// Answers waiting for room now, for the gauge.
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Relaxed)
    }

    /// A share of nothing yet for one request's body, grown as it is read
    /// ([`Held::try_grow`]).
    pub(crate) fn share(&self) -> Held<&ByteBudget> {
        Held {
            budget: self,
            bytes: 0,
        }
    }

    /// Whether `bytes` more would fit now: a body that declares more than the room left is
    /// refused before any of it is read.
    pub(crate) fn has_room(&self, bytes: usize) -> bool {
        let held = self.held.load(Ordering::Relaxed);
        held.saturating_add(bytes) <= self.max.load(Ordering::Relaxed)
    }

    /// A share of `bytes` now, or `None` when the budget has no room for it; held by an
    /// `Arc` (an answer's, which its body keeps).
    pub(crate) fn take_owned(budget: &Arc<Self>, bytes: usize) -> Option<Held<Arc<ByteBudget>>> {
        // Made only once added: a share dropped gives its bytes back.
        budget.add(bytes).then(|| Held {
            budget: budget.clone(),
            bytes,
        })
    }

    /// A share of `bytes` once the budget has room for it: a server's answer, which came and
    /// must not be lost, waits for the requests before it to give theirs back. Its caller
    /// bounds the wait.
    pub(crate) async fn room_for(self: &Arc<Self>, bytes: usize) -> Held<Arc<ByteBudget>> {
        let mut held = Self::empty(self);
        held.grow(bytes).await;
        held
    }

    /// A share of nothing yet, to grow as what it counts is read ([`Held::grow`]).
    pub(crate) fn empty(budget: &Arc<Self>) -> Held<Arc<ByteBudget>> {
        Held {
            budget: budget.clone(),
            bytes: 0,
        }
    }

    /// Adds `bytes` to what is held if they fit. The count never passes the bound, not even
    /// for a refusal's moment: the gauge reads it, and a refusal that raised it for a moment
    /// would refuse another request that fits. A try that fails waits for the next share
    /// given back, which those held bring.
    fn add(&self, bytes: usize) -> bool {
        if bytes == 0 {
            return true;
        }
        let max = self.max.load(Ordering::Relaxed);
        let more = |held: usize| held.checked_add(bytes).filter(|&after| after <= max);
        (self.held)
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, more)
            .is_ok()
    }

    fn give_back(&self, bytes: usize) {
        self.held.fetch_sub(bytes, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) > 0 {
            self.wake_those_it_has_room_for();
        }
    }

    /// Wakes, oldest first, each waiting answer the room left would hold, counting each
    /// against the room as it goes; one too large for what is left is passed over.
    fn wake_those_it_has_room_for(&self) {
        for waker in self.those_it_has_room_for() {
            waker.wake();
        }
    }

    /// The wakers of the waiting answers the room left would hold, taken out of the queue.
    /// Woken once its lock is released: waking, or dropping a task's last waker, runs the
    /// executor's code, which may give a share back and take the lock again.
    fn those_it_has_room_for(&self) -> Vec<Waker> {
        let mut queue = self.queue.locked();
        let held = self.held.load(Ordering::SeqCst);
        let mut room = self.max.load(Ordering::Relaxed).saturating_sub(held);
        let mut woken = Vec::new();
        if room > 0 {
            queue.waiting.retain(|waiter| {
                if waiter.bytes > room {
                    return true;
                }
                room -= waiter.bytes;
                woken.push(waiter.waker.clone());
                false
            });
        }
        woken
    }
}

/// The answers waiting for room, oldest first: each keeps its place by its ticket, also when
/// it is woken and finds the room taken by then.
#[derive(Debug, Default)]
struct Queue {
    tickets: u64,
    waiting: VecDeque<Waiter>,
}

#[derive(Debug)]
struct Waiter {
    ticket: u64,
    bytes: usize,
    waker: Waker,
}

impl Queue {
    /// Puts the waiter in its place, or updates its waker where it is; the waker replaced,
    /// to be dropped once the lock is released.
    fn wait(&mut self, ticket: u64, bytes: usize, waker: &Waker) -> Option<Waker> {
        match self.waiting.binary_search_by_key(&ticket, |w| w.ticket) {
            Ok(at) => {
                let kept = &mut self.waiting[at].waker;
                (!kept.will_wake(waker)).then(|| std::mem::replace(kept, waker.clone()))
            }
            Err(at) => {
                let waker = waker.clone();
                self.waiting.insert(
                    at,
                    Waiter {
                        ticket,
                        bytes,
                        waker,
                    },
                );
                None
            }
        }
    }

    /// Takes the waiter out; false when a share given back had already taken it out to wake
    /// it.
    fn leave(&mut self, ticket: u64) -> bool {
        let at = self.waiting.binary_search_by_key(&ticket, |w| w.ticket);
        at.map(|at| self.waiting.remove(at)).is_ok()
    }
}

/// An answer waiting for room for `bytes` more ([`Held::grow`]); counted among the waiting
/// from before its first try until it has its room or gives up.
struct RoomFor<'a> {
    budget: &'a ByteBudget,
    bytes: usize,
    ticket: Option<u64>,
}

impl<'a> RoomFor<'a> {
    fn new(budget: &'a ByteBudget, bytes: usize) -> RoomFor<'a> {
        // Counted before the room is tried, so that a share given back after the try sees
        // a waiter and takes the queue's lock, which the try holds until it is queued.
        budget.waiting.fetch_add(1, Ordering::SeqCst);
        RoomFor {
            budget,
            bytes,
            ticket: None,
        }
    }
}

impl Future for RoomFor<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let mut queue = this.budget.queue.locked();
        if this.budget.add(this.bytes) {
            if let Some(ticket) = this.ticket.take() {
                queue.leave(ticket);
            }
            return Poll::Ready(());
        }
        let ticket = *this.ticket.get_or_insert_with(|| {
            queue.tickets += 1;
            queue.tickets
        });
        let replaced = queue.wait(ticket, this.bytes, cx.waker());
        drop(queue);
        drop(replaced);
        Poll::Pending
    }
}

impl Drop for RoomFor<'_> {
    fn drop(&mut self) {
        self.budget.waiting.fetch_sub(1, Ordering::SeqCst);
        let Some(ticket) = self.ticket else { return };
        let queued = self.budget.queue.locked().leave(ticket);
        if !queued {
            // Woken for room it will not take: counted against it, that room may be what
            // an answer passed over needs.
            self.budget.wake_those_it_has_room_for();
        }
    }
}

/// One request's share of the budget (a borrow of it for a request's body, held by the
/// request's future; an `Arc` for an answer, held by its body), given back when dropped.
#[derive(Debug)]
pub(crate) struct Held<R: Deref<Target = ByteBudget>> {
    budget: R,
    bytes: usize,
}

impl<R: Deref<Target = ByteBudget>> Held<R> {
    /// Adds `bytes` to the share if the budget has room for them now.
    pub(crate) fn try_grow(&mut self, bytes: usize) -> bool {
        let added = self.budget.add(bytes);
        if added {
            self.bytes += bytes;
        }
        added
    }

    /// Adds `bytes` to the share once the budget has room for them: what is read for a
    /// request waits for those before it to give theirs back. Its caller bounds the wait.
    pub(crate) async fn grow(&mut self, bytes: usize) {
        if !self.try_grow(bytes) {
            RoomFor::new(&self.budget, bytes).await;
            self.bytes += bytes;
        }
    }

    /// Gives back what the share holds beyond `bytes`.
    pub(crate) fn shrink_to(&mut self, bytes: usize) {
        let less = self.bytes.saturating_sub(bytes);
        if less > 0 {
            self.budget.give_back(less);
            self.bytes -= less;
        }
    }
}

impl Held<Arc<ByteBudget>> {
    /// `bytes` holding this share until the last of them is dropped: once the front has
    /// written them to the client, or the client has gone. Until then they are counted,
    /// wherever they wait (an HTTP server's buffers hold a client's answer until it takes
    /// it), so a client that reads nothing holds its share.
    pub(crate) fn keeping(self, bytes: Bytes) -> Bytes {
        if self.bytes == 0 {
            return bytes;
        }
        Bytes::from_owner(Counted {
            bytes,
            _share: self,
        })
    }
}

/// Bytes and the share that counts them ([`Held::keeping`]).
struct Counted {
    bytes: Bytes,
    _share: Held<Arc<ByteBudget>>,
}

impl AsRef<[u8]> for Counted {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

impl<R: Deref<Target = ByteBudget>> Drop for Held<R> {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.budget.give_back(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(budget: &ByteBudget, bytes: usize) -> Option<Held<&ByteBudget>> {
        let mut share = budget.share();
        share.try_grow(bytes).then_some(share)
    }

    #[test]
    fn refusals_never_hold_room_another_request_fits_in() {
        let budget = ByteBudget::new(100);
        let _most = take(&budget, 60).unwrap();
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    assert!(take(&budget, 50).is_none());
                }
            });
            let refused = (0..100_000)
                .filter(|_| budget.held() > 60 || take(&budget, 40).is_none())
                .count();
            stop.store(true, Ordering::Relaxed);
            assert_eq!(
                refused, 0,
                "times the room was past the bound or a fitting share refused"
            );
        });
    }

    #[test]
    fn shares_fit_the_budget_and_are_given_back() {
        let budget = ByteBudget::new(100);
        let a = take(&budget, 60).expect("room for the first");
        assert!(take(&budget, 41).is_none(), "past the bound");
        assert!(take(&budget, 0).is_some(), "an empty share always fits");
        let mut b = take(&budget, 40).expect("room for the second");
        assert_eq!(budget.held(), 100);
        b.shrink_to(50);
        assert_eq!(budget.held(), 100, "a share is never grown by shrinking");
        b.shrink_to(10);
        assert_eq!(budget.held(), 70);
        drop(a);
        drop(b);
        assert_eq!(budget.held(), 0);
    }

    #[tokio::test]
    async fn an_answer_waits_for_room_and_takes_it_when_a_share_is_given_back() {
        let budget = Arc::new(ByteBudget::new(100));
        let first = take(&budget, 70).unwrap();
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move { budget.room_for(50).await.bytes }
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "no room yet");
        drop(first);
        assert_eq!(waiting.await.unwrap(), 50);
        assert_eq!(budget.held(), 0, "the answer's share went with it");
        assert_eq!(budget.waiting.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn a_share_grows_as_there_is_room() {
        let budget = Arc::new(ByteBudget::new(100));
        let mut line = ByteBudget::empty(&budget);
        assert!(line.try_grow(60));
        assert!(!line.try_grow(41), "past the bound");
        let other = take(&budget, 40).unwrap();
        let grown = tokio::spawn(async move {
            line.grow(30).await;
            line
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!grown.is_finished(), "no room yet");
        drop(other);
        let line = grown.await.unwrap();
        assert_eq!((line.bytes, budget.held()), (90, 90));
        drop(line);
        assert_eq!(budget.held(), 0);
    }

    /// Wakes counted, for a future polled by hand.
    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl std::task::Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A share of `bytes` grown by hand: its future, polled once, and its wakes.
    struct Grower<'a> {
        future: Pin<Box<dyn Future<Output = Held<&'a ByteBudget>> + 'a>>,
        wakes: Arc<Wakes>,
    }

    impl<'a> Grower<'a> {
        fn new(budget: &'a ByteBudget, bytes: usize) -> Grower<'a> {
            let mut grower = Grower {
                future: Box::pin(async move {
                    let mut share = budget.share();
                    share.grow(bytes).await;
                    share
                }),
                wakes: Arc::default(),
            };
            assert!(grower.poll().is_none(), "no room yet");
            grower
        }

        fn poll(&mut self) -> Option<Held<&'a ByteBudget>> {
            let waker = Waker::from(self.wakes.clone());
            match self.future.as_mut().poll(&mut Context::from_waker(&waker)) {
                Poll::Ready(share) => Some(share),
                Poll::Pending => None,
            }
        }

        fn woken(&self) -> usize {
            self.wakes.0.load(Ordering::SeqCst)
        }
    }

    #[test]
    fn a_share_given_back_wakes_only_the_answers_it_has_room_for() {
        let budget = ByteBudget::new(100);
        let mut full = take(&budget, 100).unwrap();
        let mut large = Grower::new(&budget, 80);
        let mut small = [30, 30, 30].map(|bytes| Grower::new(&budget, bytes));
        full.shrink_to(40);
        let woken = small.each_ref().map(Grower::woken);
        assert_eq!(
            (large.woken(), woken),
            (0, [1, 1, 0]),
            "oldest first, the large passed over"
        );
        let served: Vec<_> = small[..2].iter_mut().map(|g| g.poll().unwrap()).collect();
        assert_eq!(budget.held(), 100);
        drop(full);
        assert_eq!(
            (large.woken(), small[2].woken()),
            (0, 1),
            "40 is no room for 80"
        );
        let last = small[2].poll().unwrap();
        drop((served, last));
        assert_eq!(large.woken(), 1);
        assert_eq!(large.poll().unwrap().bytes, 80);
        assert_eq!(budget.held(), 0);
        assert_eq!(budget.waiting.load(Ordering::SeqCst), 0);
        assert!(budget.queue.locked().waiting.is_empty());
    }

    #[test]
    fn an_answer_woken_that_gives_up_passes_its_room_on() {
        let budget = ByteBudget::new(100);
        let full = take(&budget, 100).unwrap();
        let first = Grower::new(&budget, 60);
        let mut second = Grower::new(&budget, 60);
        drop(full);
        assert_eq!((first.woken(), second.woken()), (1, 0));
        drop(first);
        assert_eq!(
            second.woken(),
            1,
            "the room counted for the first goes to the next"
        );
        assert_eq!(second.poll().unwrap().bytes, 60);
    }

    #[test]
    fn an_answer_woken_whose_room_was_taken_keeps_its_place() {
        let budget = ByteBudget::new(100);
        let full = take(&budget, 100).unwrap();
        let mut first = Grower::new(&budget, 60);
        let mut second = Grower::new(&budget, 50);
        drop(full);
        let thief = take(&budget, 50).unwrap();
        assert!(
            first.poll().is_none(),
            "its room was taken before it came for it"
        );
        drop(thief);
        assert_eq!(
            (first.woken(), second.woken()),
            (2, 0),
            "the first is still first"
        );
        let served = first.poll().unwrap();
        assert!(second.poll().is_none());
        drop(served);
        assert_eq!(second.poll().unwrap().bytes, 50);
    }

    /// A waker that gives a share back when woken, as a task may once it runs.
    struct GivesBack(Mutex<Option<Held<Arc<ByteBudget>>>>);

    impl std::task::Wake for GivesBack {
        fn wake(self: Arc<Self>) {
            self.0.locked().take();
        }
    }

    #[test]
    fn a_waker_may_give_a_share_back_as_it_is_woken() {
        let budget = Arc::new(ByteBudget::new(100));
        let full = ByteBudget::take_owned(&budget, 60).unwrap();
        let other = ByteBudget::take_owned(&budget, 40).unwrap();
        let gives_back = Arc::new(GivesBack(Mutex::new(Some(other))));
        let waker = Waker::from(gives_back.clone());
        let mut cx = Context::from_waker(&waker);
        let mut waiting = std::pin::pin!(RoomFor::new(&budget, 50));
        assert!(waiting.as_mut().poll(&mut cx).is_pending());
        drop(full);
        assert!(
            gives_back.0.locked().is_none(),
            "woken, and gave its share back"
        );
        assert_eq!(budget.held(), 0);
        assert!(waiting.as_mut().poll(&mut cx).is_ready());
    }

    #[test]
    fn bytes_kept_hold_their_share_while_any_of_them_wait() {
        let budget = Arc::new(ByteBudget::new(1 << 20));
        let held = ByteBudget::take_owned(&budget, 1_000).unwrap();
        let bytes = held.keeping(Bytes::from(vec![b'x'; 1_000]));
        let waiting = bytes.slice(500..);
        drop(bytes);
        assert_eq!(budget.held(), 1_000, "a server's buffer still holds some");
        drop(waiting);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn a_lower_bound_keeps_what_is_held_and_refuses_more() {
        let budget = ByteBudget::new(100);
        let a = take(&budget, 80).unwrap();
        budget.set_max(50);
        assert!(take(&budget, 1).is_none());
        drop(a);
        assert!(take(&budget, 50).is_some());
    }
}
