//! The requests an HTTP server answered on a numbered stream, which a client may ask the
//! server for again: a GET with `Last-Event-ID` (SEP-1699), after its connection broke. The
//! server sends what followed that event once more, the answer among it, and that answer is
//! read under the rules of the request it answers (masked, rewritten, output-checked), found
//! here by its scope and id. Otherwise a client could drop its connection to read a server's
//! answer unread. Every such request is kept, answered or not: toolgate cannot tell an answer
//! the client read from one written into a connection that was already gone.
//!
//! The answer as toolgate sent it is kept beside its request, and sent again as it was: read
//! again, it would be counted and logged once more, and masked under a new reference.
//!
//! Bounded as the tasks followed are: at most [`MAX_KEPT`] requests, the oldest forgotten
//! first; the same id used again in the scope replaces the one before. An answer to a
//! forgotten request passes as it comes. Answers are kept up to [`MAX_ANSWER`] bytes each and
//! [`MAX_ANSWERS`] in all, the oldest let go first; an answer not kept is read again.

use crate::catalog::ScopeKey;
use crate::jsonrpc::id_key;
use crate::locks::MutexExt;
use crate::pipeline::Pending;
use bytes::Bytes;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Requests kept at once, for one server.
pub(crate) const MAX_KEPT: usize = 4096;

/// The longest request id kept (clients write numbers, or ids of a UUID's length).
const MAX_ID: usize = 256;

/// The largest answer kept as sent.
pub(crate) const MAX_ANSWER: usize = 64 * 1024;

/// The bytes of answers kept at once, for one server.
pub(crate) const MAX_ANSWERS: usize = 4 * 1024 * 1024;

/// A request as its answer names it: its scope and its id, spelled one way.
type Named = (ScopeKey, Box<str>);

#[derive(Default)]
pub(crate) struct NumberedStreams(Mutex<Kept>);

#[derive(Default)]
struct Kept {
    requests: HashMap<Named, (Pending, Option<Bytes>)>,
    /// The order they were kept in, to forget the oldest.
    order: VecDeque<Named>,
    /// The requests whose answers were kept, in that order, to let the oldest answers go.
    answered: VecDeque<Named>,
    /// The bytes of the answers kept.
    answers: usize,
}

impl NumberedStreams {
    /// `pending` was answered (`sent`, as toolgate sent it), or left unanswered, on a
    /// numbered stream.
    pub(crate) fn keep(&self, pending: &Pending, sent: Option<Bytes>) {
        let Some(id) = pending.id.as_deref().filter(|id| id.get().len() <= MAX_ID) else {
            return;
        };
        let named: Named = (pending.key, id_key(id.get()).into());
        let sent = sent.filter(|a| a.len() <= MAX_ANSWER);
        let mut kept = self.0.locked();
        if let Some(a) = &sent {
            kept.answers += a.len();
            kept.answered.push_back(named.clone());
        }
        match kept.requests.insert(named.clone(), (pending.clone(), sent)) {
            Some((_, before)) => kept.answers -= before.map_or(0, |a| a.len()),
            None => kept.order.push_back(named),
        }
        if kept.order.len() > MAX_KEPT
            && let Some(oldest) = kept.order.pop_front()
            && let Some((_, answer)) = kept.requests.remove(&oldest)
        {
            kept.answers -= answer.map_or(0, |a| a.len());
        }
        kept.within_bytes();
    }

    /// The request of scope `key` that an answer with id `id` (as written) answers, if kept,
    /// with its answer as sent when that is kept.
    pub(crate) fn found(&self, key: ScopeKey, id: &str) -> Option<(Pending, Option<Bytes>)> {
        if id.len() > MAX_ID {
            return None;
        }
        let kept = self.0.locked();
        kept.requests.get(&(key, id_key(id).into())).cloned()
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.locked().requests.len()
    }
}

impl Kept {
    /// Lets the oldest answers go until those kept fit in [`MAX_ANSWERS`]; their requests
    /// stay.
    fn within_bytes(&mut self) {
        while self.answers > MAX_ANSWERS
            && let Some(named) = self.answered.pop_front()
        {
            if let Some((_, answer)) = self.requests.get_mut(&named)
                && let Some(a) = answer.take()
            {
                self.answers -= a.len();
            }
        }
        // Names of requests forgotten, or answered again, since: once each is left.
        if self.answered.len() > 2 * MAX_KEPT {
            let (requests, mut once) = (&self.requests, std::collections::HashSet::new());
            self.answered.retain(|n| {
                requests.get(n).is_some_and(|(_, a)| a.is_some()) && once.insert(n.clone())
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::Gateway;
    use crate::mcp::Era;
    use crate::pipeline::Kind;
    use serde_json::value::RawValue;

    fn request(context: u64, id: &str) -> Pending {
        static GATEWAY: std::sync::OnceLock<std::sync::Arc<Gateway>> = std::sync::OnceLock::new();
        let gw = GATEWAY.get_or_init(|| {
            let config = crate::config::Config {
                upstream: Some("http://127.0.0.1:9/mcp".into()),
                ..Default::default()
            };
            Gateway::new(config).unwrap()
        });
        Pending {
            id: Some(RawValue::from_string(id.into()).unwrap()),
            kind: Kind::Other,
            era: Era::Legacy,
            key: ScopeKey {
                upstream: 0,
                context,
            },
            target: gw.targets[0].clone(),
            client: None,
            bridged: None,
        }
    }

    #[test]
    fn an_answer_finds_its_request_in_its_own_scope_by_the_ids_value() {
        let kept = NumberedStreams::default();
        let pending = request(1, "7");
        kept.keep(&pending, None);
        assert!(kept.found(pending.key, "7").is_some());
        assert!(
            kept.found(pending.key, "7.0").is_some(),
            "the same id, spelled otherwise"
        );
        assert!(kept.found(pending.key, "7").is_some(), "kept once found");
        assert!(kept.found(request(2, "7").key, "7").is_none());
        assert!(kept.found(pending.key, "8").is_none());
    }

    #[test]
    fn the_oldest_are_forgotten_past_the_bound() {
        let kept = NumberedStreams::default();
        for i in 0..MAX_KEPT + 5 {
            kept.keep(&request(1, &i.to_string()), None);
        }
        assert_eq!(kept.len(), MAX_KEPT);
        assert!(kept.found(request(1, "0").key, "4").is_none());
        assert!(kept.found(request(1, "0").key, "5").is_some());
        kept.keep(&request(1, "5"), None);
        kept.keep(&request(1, &format!("\"{}\"", "x".repeat(MAX_ID))), None);
        assert_eq!(kept.len(), MAX_KEPT);
    }

    #[test]
    fn answers_are_kept_as_sent_within_their_bounds() {
        let kept = NumberedStreams::default();
        let answer = |n: usize| Bytes::from(vec![b' '; n]);
        let sent = |id: &str| {
            let found = kept.found(request(1, "0").key, id);
            found.and_then(|(_, a)| a).map(|a| a.len())
        };
        kept.keep(&request(1, "1"), Some(answer(10)));
        assert_eq!(sent("1"), Some(10));
        kept.keep(&request(1, "2"), Some(answer(MAX_ANSWER + 1)));
        assert!(
            kept.found(request(1, "0").key, "2").is_some(),
            "the request kept"
        );
        assert_eq!(sent("2"), None, "an answer too large to keep is read again");
        // The oldest answers go once they would take more than their bound in all.
        let each = MAX_ANSWER;
        for i in 3..4 + MAX_ANSWERS / each {
            kept.keep(&request(1, &i.to_string()), Some(answer(each)));
        }
        assert_eq!(sent("1"), None);
        assert_eq!(sent("3"), None);
        assert_eq!(sent("4"), Some(each));
        assert!(kept.0.locked().answers <= MAX_ANSWERS);
        // Answered again under the same id, counted once.
        kept.keep(&request(1, "4"), Some(answer(5)));
        let total: usize = (kept.0.locked().requests.values())
            .filter_map(|(_, a)| a.as_ref().map(Bytes::len))
            .sum();
        assert_eq!(kept.0.locked().answers, total);
    }
}
