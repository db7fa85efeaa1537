//! The answers a child owes, by request id: the requests waiting for theirs, and the requests
//! given up on (timed out, cancelled, their clients gone) whose answers may still come.
//!
//! A child answers each request once, whenever it gets to it. Under its clients' own ids (a
//! session's child, the stdio front's), an answer to a request given up on would otherwise
//! be taken by the next request under the same id, and a client would read one call's result
//! as another's. So an id given up on stays owed until its answer comes: that answer is
//! dropped, and a request under the id meanwhile is refused as still in flight (MCP asks a
//! client never to use an id twice in a session). What the child says of such a request
//! meanwhile (its progress, under the request's progress token) goes to no one either: MCP
//! has a server send progress only for a request in progress, and its client has its answer.
//! A child that never answers would keep them all: at most [`MAX_GIVEN_UP`] are kept, the
//! oldest forgotten first.

use std::collections::{HashMap, HashSet, VecDeque};

/// Ids given up on kept for one child.
pub(crate) const MAX_GIVEN_UP: usize = 1024;

/// The answers owed, each request waiting at a `W` (where its answer is sent). Ids and
/// progress tokens are keys ([`crate::jsonrpc::id_key`]).
pub(crate) struct Owing<W> {
    waiting: HashMap<String, Waiting<W>>,
    /// The ids given up on, each with its request's progress token.
    given_up: HashMap<String, Option<String>>,
    /// The progress tokens of the requests given up on.
    stale: HashSet<String>,
    /// The ids given up on, oldest first (an id answered since may still be listed).
    order: VecDeque<String>,
}

/// A request waiting, and the progress token it carries.
struct Waiting<W> {
    waiter: W,
    token: Option<String>,
}

impl<W> Default for Owing<W> {
    fn default() -> Self {
        Owing {
            waiting: HashMap::new(),
            given_up: HashMap::new(),
            stale: HashSet::new(),
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
    /// Request `key`, carrying progress token `token`, waits for its answer at `waiter`;
    /// `false` (and nothing changed) when the child still owes an answer under `key`.
    pub(crate) fn wait(&mut self, key: String, waiter: W, token: Option<String>) -> bool {
        if self.owes(&key) {
            return false;
        }
        // The token is this request's now, whatever one given up on said of it.
        if let Some(token) = &token {
            self.stale.remove(token);
        }
        self.waiting.insert(key, Waiting { waiter, token });
        true
    }

    /// Whether progress under `token` is about a request given up on.
    pub(crate) fn is_stale(&self, token: &str) -> bool {
        self.stale.contains(token)
    }

    /// Whether any progress token is of a request given up on: a message need not be read
    /// for its token when none is.
    pub(crate) fn has_stale(&self) -> bool {
        !self.stale.is_empty()
    }

    /// Whether the child still owes an answer under `key`.
    pub(crate) fn owes(&self, key: &str) -> bool {
        self.waiting.contains_key(key) || self.given_up.contains_key(key)
    }

    /// The answer under `key` came.
    pub(crate) fn claim(&mut self, key: &str) -> Claimed<W> {
        if let Some(waiting) = self.waiting.remove(key) {
            return Claimed::Waiting(waiting.waiter);
        }
        match self.given_up.remove(key) {
            // Its answer says the last of it.
            Some(token) => {
                self.forget_token(token);
                Claimed::GivenUp
            }
            None => Claimed::Unknown,
        }
    }

    /// Request `key` waits no more, its answer still owed; its waiter, if it had one.
    pub(crate) fn give_up(&mut self, key: &str) -> Option<W> {
        let Waiting { waiter, token } = self.waiting.remove(key)?;
        if let Some(token) = &token {
            self.stale.insert(token.clone());
        }
        self.given_up.insert(key.to_owned(), token);
        self.order.push_back(key.to_owned());
        while self.given_up.len() > MAX_GIVEN_UP {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(token) = self.given_up.remove(&oldest) {
                self.forget_token(token);
            }
        }
        // Listed ids since answered are let go with the rest.
        if self.order.len() > 2 * MAX_GIVEN_UP {
            self.order.retain(|k| self.given_up.contains_key(k));
        }
        Some(waiter)
    }

    fn forget_token(&mut self, token: Option<String>) {
        if let Some(token) = token {
            self.stale.remove(&token);
        }
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
        assert!(owing.wait("7".into(), waiter(), None));
        assert!(
            !owing.wait("7".into(), waiter(), None),
            "one request per id"
        );
        assert!(owing.give_up("7").is_some());
        assert!(owing.owes("7"));
        assert!(!owing.wait("7".into(), waiter(), None), "still owed");
        assert!(matches!(owing.claim("7"), Claimed::GivenUp));
        assert!(!owing.owes("7"));
        assert!(owing.wait("7".into(), waiter(), None), "free again");
        assert!(matches!(owing.claim("7"), Claimed::Waiting(_)));
        assert!(matches!(owing.claim("7"), Claimed::Unknown));
    }

    #[test]
    fn ids_given_up_on_are_bounded_the_oldest_forgotten_first() {
        let mut owing = Owing::<u8>::default();
        for i in 0..MAX_GIVEN_UP + 10 {
            let key = i.to_string();
            assert!(owing.wait(key.clone(), waiter(), None));
            owing.give_up(&key);
        }
        assert_eq!(owing.given_up.len(), MAX_GIVEN_UP);
        assert!(!owing.owes("9"), "the oldest forgotten");
        assert!(owing.owes("10"));
        for i in 0..5 * MAX_GIVEN_UP {
            let key = format!("a{i}");
            owing.wait(key.clone(), waiter(), None);
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
    fn progress_of_a_request_given_up_on_is_stale_until_its_answer_or_a_new_owner() {
        let mut owing = Owing::<u8>::default();
        owing.wait("1".into(), waiter(), Some("\"p\"".into()));
        assert!(!owing.has_stale());
        owing.give_up("1");
        assert!(owing.is_stale("\"p\""));
        let _ = owing.claim("1");
        assert!(!owing.has_stale(), "its answer was the last of it");
        owing.wait("2".into(), waiter(), Some("\"p\"".into()));
        owing.give_up("2");
        owing.wait("3".into(), waiter(), Some("\"p\"".into()));
        assert!(!owing.is_stale("\"p\""), "the token is the new request's");
    }

    #[test]
    fn a_request_that_never_reached_the_child_is_owed_nothing() {
        let mut owing = Owing::<u8>::default();
        owing.wait("1".into(), waiter(), None);
        owing.forget("1");
        assert!(!owing.owes("1"));
    }
}
