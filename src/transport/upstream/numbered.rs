//! The requests an HTTP server answered on a numbered stream, which a client may ask the
//! server for again: a GET with `Last-Event-ID` (SEP-1699), after its connection broke. The
//! server sends what followed that event once more, the answer among it, and that answer is
//! read under the rules of the request it answers (masked, rewritten, output-checked), found
//! here by its scope and id. Otherwise a client could drop its connection to read a server's
//! answer unread. Every such request is kept, answered or not: toolgate cannot tell an answer
//! the client read from one written into a connection that was already gone.
//!
//! Bounded as the tasks followed are: at most [`MAX_KEPT`] requests, the oldest forgotten
//! first; the same id used again in the scope replaces the one before. An answer to a
//! forgotten request passes as it comes.

use crate::catalog::ScopeKey;
use crate::jsonrpc::id_key;
use crate::locks::MutexExt;
use crate::pipeline::Pending;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Requests kept at once, for one server.
pub(crate) const MAX_KEPT: usize = 4096;

/// The longest request id kept (clients write numbers, or ids of a UUID's length).
const MAX_ID: usize = 256;

/// A request as its answer names it: its scope and its id, spelled one way.
type Named = (ScopeKey, Box<str>);

#[derive(Default)]
pub(crate) struct NumberedStreams(Mutex<Kept>);

#[derive(Default)]
struct Kept {
    requests: HashMap<Named, Pending>,
    /// The order they were kept in, to forget the oldest.
    order: VecDeque<Named>,
}

impl NumberedStreams {
    /// `pending` was answered, or left unanswered, on a numbered stream.
    pub(crate) fn keep(&self, pending: &Pending) {
        let Some(id) = pending.id.as_deref().filter(|id| id.get().len() <= MAX_ID) else {
            return;
        };
        let named: Named = (pending.key, id_key(id.get()).into());
        let mut kept = self.0.locked();
        if kept
            .requests
            .insert(named.clone(), pending.clone())
            .is_some()
        {
            return;
        }
        kept.order.push_back(named);
        if kept.order.len() > MAX_KEPT
            && let Some(oldest) = kept.order.pop_front()
        {
            kept.requests.remove(&oldest);
        }
    }

    /// The request of scope `key` that an answer with id `id` (as written) answers, if kept.
    pub(crate) fn found(&self, key: ScopeKey, id: &str) -> Option<Pending> {
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
        kept.keep(&pending);
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
            kept.keep(&request(1, &i.to_string()));
        }
        assert_eq!(kept.len(), MAX_KEPT);
        assert!(kept.found(request(1, "0").key, "4").is_none());
        assert!(kept.found(request(1, "0").key, "5").is_some());
        kept.keep(&request(1, "5"));
        kept.keep(&request(1, &format!("\"{}\"", "x".repeat(MAX_ID))));
        assert_eq!(kept.len(), MAX_KEPT);
    }
}
