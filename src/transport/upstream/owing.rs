//! The answers a child owes, by request id: the requests waiting for theirs, and the requests
//! given up on (timed out, cancelled, their clients gone) whose answers may still come.
//!
//! A child answers each request once, whenever it gets to it. Under its clients' own ids (a
//! session's child, the stdio front's), an answer to a request given up on would otherwise
//! be taken by the next request under the same id, and a client would read one call's result
//! as another's. So an id given up on stays owed until its answer comes: that answer is
//! dropped, and a request under the id meanwhile is refused as still in flight (MCP asks a
//! client never to use an id twice in a session). A child that never answers would keep them
//! all: at most [`MAX_GIVEN_UP`] are kept, the oldest forgotten first.

use std::collections::{HashMap, HashSet, VecDeque};

/// Ids given up on kept for one child.
pub(crate) const MAX_GIVEN_UP: usize = 1024;

/// The answers owed, each request waiting at a `W` (where its answer is sent).
pub(crate) struct Owing<W> {
    waiting: HashMap<String, W>,
    given_up: HashSet<String>,
    /// The ids given up on, oldest first (an id answered since may still be listed).
    order: VecDeque<String>,
}

impl<W> Default for Owing<W> {
    fn default() -> Self {
        Owing {
            waiting: HashMap::new(),
            given_up: HashSet::new(),
            order: VecDeque::new(),
        }
    }
}

/// Whom an answer is for.
pub(crate) enum Claimed<W> {
    Waiting(W),
    /// A request given up on: the answer goes to no one.
    GivenUp,
    /// No request toolgate sent, or one given up on too long ago.
    Unknown,
}

impl<W> Owing<W> {
    /// Request `key` waits for its answer at `waiter`; `false` (and nothing changed) when the
    /// child still owes an answer under `key`.
    pub(crate) fn wait(&mut self, key: String, waiter: W) -> bool {
        if self.owes(&key) {
            return false;
        }
        self.waiting.insert(key, waiter);
        true
    }

    /// Whether the child still owes an answer under `key`.
    pub(crate) fn owes(&self, key: &str) -> bool {
        self.waiting.contains_key(key) || self.given_up.contains(key)
    }

    /// The answer under `key` came.
    pub(crate) fn claim(&mut self, key: &str) -> Claimed<W> {
        if let Some(waiter) = self.waiting.remove(key) {
            return Claimed::Waiting(waiter);
        }
        match self.given_up.remove(key) {
            true => Claimed::GivenUp,
            false => Claimed::Unknown,
        }
    }

    /// Request `key` waits no more, its answer still owed; its waiter, if it had one.
    pub(crate) fn give_up(&mut self, key: &str) -> Option<W> {
        let waiter = self.waiting.remove(key)?;
        if self.given_up.insert(key.to_owned()) {
            self.order.push_back(key.to_owned());
        }
        while self.given_up.len() > MAX_GIVEN_UP {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            self.given_up.remove(&oldest);
        }
        // Listed ids since answered are let go with the rest.
        if self.order.len() > 2 * MAX_GIVEN_UP {
            self.order.retain(|k| self.given_up.contains(k));
        }
        Some(waiter)
    }

    /// Request `key` never reached the child: nothing is owed for it.
    pub(crate) fn forget(&mut self, key: &str) {
        self.waiting.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request's waiter, as the tests need one.
    fn waiter() -> u8 {
        0
    }

    #[test]
    fn an_answer_to_a_request_given_up_on_goes_to_no_one_and_frees_its_id() {
        let mut owing = Owing::<u8>::default();
        assert!(owing.wait("7".into(), waiter()));
        assert!(!owing.wait("7".into(), waiter()), "one request per id");
        assert!(owing.give_up("7").is_some());
        assert!(owing.owes("7"));
        assert!(!owing.wait("7".into(), waiter()), "still owed");
        assert!(matches!(owing.claim("7"), Claimed::GivenUp));
        assert!(!owing.owes("7"));
        assert!(owing.wait("7".into(), waiter()), "free again");
        assert!(matches!(owing.claim("7"), Claimed::Waiting(_)));
        assert!(matches!(owing.claim("7"), Claimed::Unknown));
    }

    #[test]
    fn ids_given_up_on_are_bounded_the_oldest_forgotten_first() {
        let mut owing = Owing::<u8>::default();
        for i in 0..MAX_GIVEN_UP + 10 {
            let key = i.to_string();
            assert!(owing.wait(key.clone(), waiter()));
            owing.give_up(&key);
        }
        assert_eq!(owing.given_up.len(), MAX_GIVEN_UP);
        assert!(!owing.owes("9"), "the oldest forgotten");
        assert!(owing.owes("10"));
        for i in 0..5 * MAX_GIVEN_UP {
            let key = format!("a{i}");
            owing.wait(key.clone(), waiter());
            owing.give_up(&key);
            let _ = owing.claim(&key);
        }
        assert!(
            owing.order.len() <= 2 * MAX_GIVEN_UP + 1,
            "{}",
            owing.order.len()
        );
    }

    #[test]
    fn a_request_that_never_reached_the_child_is_owed_nothing() {
        let mut owing = Owing::<u8>::default();
        owing.wait("1".into(), waiter());
        owing.forget("1");
        assert!(!owing.owes("1"));
    }
}
