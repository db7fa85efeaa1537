//! How many bytes of request bodies the HTTP front holds at once, every client's together
//! (`limits.max_request_bytes_in_flight`).
//!
//! `limits.max_body_bytes` bounds one body, but a client sends many at once: up to 200 on
//! one HTTP/2 connection, one on each of thousands of HTTP/1.1 connections. A body is held
//! from its first byte until its request is answered, so a client that starts large bodies
//! and never finishes them would make toolgate hold gigabytes (880 MiB from one HTTP/2
//! connection). With no room, a request is refused (503) before any of its body is read;
//! what is already held is never dropped.
//!
//! One count for the process, kept across reloads (a reload may change its bound). Two
//! atomic operations per request, both on the thread that reads the body: no lock, and no
//! count per frame (`edge::message::read` says how a share is sized).

use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Debug)]
pub(crate) struct BodyBudget {
    held: AtomicUsize,
    max: AtomicUsize,
}

impl BodyBudget {
    pub(crate) fn new(max: usize) -> BodyBudget {
        BodyBudget {
            held: AtomicUsize::new(0),
            max: AtomicUsize::new(max),
        }
    }

    /// A reload's bound: shares already taken stay held.
    pub(crate) fn set_max(&self, max: usize) {
        self.max.store(max, Ordering::Relaxed);
    }

    /// Bytes held now, for the gauge.
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// A share of `bytes` for one request, or `None` when the budget has no room for it.
    pub(crate) fn take(&self, bytes: usize) -> Option<Held<'_>> {
        self.add(bytes).then(|| Held {
            budget: self,
            bytes,
        })
    }

    /// Adds `bytes` to what is held if they fit. Two requests that race for the last room
    /// may both be refused, never both let past the bound.
    fn add(&self, bytes: usize) -> bool {
        if bytes == 0 {
            return true;
        }
        let before = self.held.fetch_add(bytes, Ordering::Relaxed);
        if before.saturating_add(bytes) <= self.max.load(Ordering::Relaxed) {
            return true;
        }
        self.held.fetch_sub(bytes, Ordering::Relaxed);
        false
    }
}

/// One request's share of the budget, given back when dropped.
#[derive(Debug)]
pub(crate) struct Held<'a> {
    budget: &'a BodyBudget,
    bytes: usize,
}

impl Held<'_> {
    /// Gives back what the share holds beyond `bytes`.
    pub(crate) fn shrink_to(&mut self, bytes: usize) {
        let less = self.bytes.saturating_sub(bytes);
        if less > 0 {
            self.budget.held.fetch_sub(less, Ordering::Relaxed);
            self.bytes -= less;
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.budget.held.fetch_sub(self.bytes, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_fit_the_budget_and_are_given_back() {
        let budget = BodyBudget::new(100);
        let a = budget.take(60).expect("room for the first");
        assert!(budget.take(41).is_none(), "past the bound");
        assert!(budget.take(0).is_some(), "an empty share always fits");
        let mut b = budget.take(40).expect("room for the second");
        assert_eq!(budget.held(), 100);
        b.shrink_to(50);
        assert_eq!(budget.held(), 100, "a share is never grown by shrinking");
        b.shrink_to(10);
        assert_eq!(budget.held(), 70);
        drop(a);
        drop(b);
        assert_eq!(budget.held(), 0);
    }

    #[test]
    fn a_lower_bound_keeps_what_is_held_and_refuses_more() {
        let budget = BodyBudget::new(100);
        let a = budget.take(80).unwrap();
        budget.set_max(50);
        assert!(budget.take(1).is_none());
        drop(a);
        assert!(budget.take(50).is_some());
    }
}
