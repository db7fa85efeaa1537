//! Input-required rounds (SEP-2322) of 2026-07-28 clients bridged to a server of the handshake
//! era. Such a server asks its client something in the middle of a call (`elicitation/create`,
//! `sampling/createMessage`, `roots/list`): an HTTP server on the call's stream, a stdio child
//! on its stdout (`child_questions`). A 2026-07-28 client cannot be asked that way, so
//! toolgate answers its call with an `InputRequiredResult` naming the question, and keeps
//! what the call still waits for (the rest of an HTTP server's stream, or a child's answer)
//! here under the round's `requestState`. The client's retry brings the answer: it goes to
//! the server, and what was kept answers the retry.
//!
//! A round is bound to the scope of the client that started it (its credential and
//! capabilities): another client naming its `requestState` finds nothing. The state is an
//! unguessable random name, so it cannot be forged; at most [`MAX_ROUNDS`] wait per server,
//! each for at most [`ROUND_TTL`], and one that expires closes its server stream.

use crate::catalog::ScopeKey;
use crate::error::UpstreamError;
use crate::locks::MutexExt;
use crate::pipeline::bridge::{self, Question, Retry};
use crate::transport::sse::Splitter;
use http::HeaderMap;
use serde_json::value::RawValue;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How long a server's question waits for the client's retry.
pub(crate) const ROUND_TTL: Duration = Duration::from_secs(300);
/// Rounds waiting at once per server; past it the oldest is dropped.
const MAX_ROUNDS: usize = 1024;

/// A call waiting for its client's answer to the server's question; `R` is what it still
/// waits for.
pub(crate) struct Parked<R = StreamRest> {
    /// Whose round it is.
    pub(crate) key: ScopeKey,
    /// The id of the server's question, which its answer must carry.
    pub(crate) asked: Box<RawValue>,
    /// The id the server will answer the call under (the client's first request's).
    pub(crate) answers_as: Box<RawValue>,
    pub(crate) rest: R,
}

/// What a call on an HTTP server still waits for.
pub(crate) struct StreamRest {
    /// The session's headers, for the answer to the question.
    pub(crate) session: HeaderMap,
    /// The rest of the server's stream: what was read and not yet split, then the body.
    pub(crate) splitter: Splitter,
    pub(crate) body: axum::body::Body,
    /// Its place among the calls the server's questions on the session's own stream go to.
    pub(crate) listening: Option<Listening>,
}

/// The rounds waiting on one server.
pub(crate) struct Rounds<R = StreamRest> {
    waiting: Mutex<HashMap<String, (Instant, Parked<R>)>>,
}

impl<R> Default for Rounds<R> {
    fn default() -> Self {
        Rounds {
            waiting: Mutex::default(),
        }
    }
}

/// Why a retry did not resume its input-required round.
pub enum Unresumed {
    /// The retry cannot be taken: what the client is told (`-32602`).
    Refused(String),
    /// The client's answer could not reach the server.
    Unavailable(UpstreamError),
}

impl Rounds {
    /// A new round's `requestState`: 128 random bits.
    pub(crate) fn state() -> String {
        let mut bytes = [0u8; 16];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
            .expect("the system's random source works");
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        format!("toolgate-round-{hex}")
    }
}

impl<R> Rounds<R> {
    /// The round a retry names, with the client's answer to its question; it leaves the
    /// store. `Err` is what the client is told.
    pub(crate) fn answered<'r>(
        &self,
        retry: &'r Retry,
        key: ScopeKey,
    ) -> Result<(Parked<R>, &'r RawValue), Unresumed> {
        let Some(parked) = self.take(&retry.state, key) else {
            return Err(Unresumed::Refused(
                "Invalid params: requestState names no round waiting here (unknown, expired, or another client's); call the tool again without it".into(),
            ));
        };
        let asked = Question::key_of(&parked.asked);
        match retry.responses.get(&asked) {
            Some(result) => Ok((parked, result)),
            None => Err(Unresumed::Refused(format!(
                "Invalid params: inputResponses has no answer to {asked:?}; call the tool again without requestState"
            ))),
        }
    }

    /// Keeps `parked` under `state`, dropping expired rounds (and the oldest past the bound).
    pub(crate) fn park(&self, state: String, parked: Parked<R>) {
        let mut waiting = self.waiting.locked();
        waiting.retain(|_, (at, _)| at.elapsed() < ROUND_TTL);
        if waiting.len() >= MAX_ROUNDS
            && let Some(oldest) = waiting
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(k, _)| k.clone())
        {
            waiting.remove(&oldest);
        }
        waiting.insert(state, (Instant::now(), parked));
    }

    /// The round `state` names, when it is `key`'s and has not expired; it leaves the store.
    fn take(&self, state: &str, key: ScopeKey) -> Option<Parked<R>> {
        let mut waiting = self.waiting.locked();
        match waiting.get(state) {
            Some((at, p)) if p.key == key && at.elapsed() < ROUND_TTL => {}
            _ => return None,
        }
        waiting.remove(state).map(|(_, p)| p)
    }
}

/// The bridged calls waiting on one server that its questions asked outside any call's own
/// stream may be for (a stdio child's, on its stdout; an HTTP server's, on the session's own
/// stream), oldest first.
#[derive(Default)]
pub(crate) struct Questions {
    next: AtomicU64,
    waiting: Mutex<VecDeque<(u64, mpsc::UnboundedSender<Question>)>>,
}

/// What became of a message offered to the calls waiting.
pub(crate) enum Offered {
    /// A call took the question.
    Taken,
    /// Not a question, or no call waits: it goes on as it came.
    Left,
    /// Several calls wait, and nothing says which one the question is for: the server is to
    /// be answered with this refusal, lest one client read (and answer) another's question.
    Ambiguous(Vec<u8>),
}

impl Questions {
    /// Hands `line` to the bridged call waiting when it is a question. Only read while a
    /// bridged call waits.
    pub(crate) fn offer(&self, line: &[u8]) -> Offered {
        let waiting = self.waiting.locked();
        let Some((_, call)) = waiting.front() else {
            return Offered::Left;
        };
        let Some(q) = bridge::question(line) else {
            return Offered::Left;
        };
        if waiting.len() > 1 {
            let why = "the client cannot be asked: several of its calls are waiting and nothing says which one this question is for";
            let refusal = crate::jsonrpc::error_response(
                Some(&q.id),
                crate::jsonrpc::INTERNAL_ERROR,
                why,
                None,
            );
            return Offered::Ambiguous(refusal);
        }
        match call.send(q) {
            Ok(()) => Offered::Taken,
            Err(_) => Offered::Left,
        }
    }

    /// A place among the calls the questions go to, until it is dropped.
    pub(crate) fn listen(self: &Arc<Self>) -> Listening {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::unbounded_channel();
        self.waiting.locked().push_back((n, tx));
        Listening {
            questions: self.clone(),
            n,
            rx,
        }
    }
}

/// A call's place among those its server's questions go to, left when it is dropped.
pub(crate) struct Listening {
    questions: Arc<Questions>,
    n: u64,
    rx: mpsc::UnboundedReceiver<Question>,
}

impl Listening {
    pub(crate) async fn recv(&mut self) -> Option<Question> {
        self.rx.recv().await
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.questions
            .waiting
            .locked()
            .retain(|(n, _)| *n != self.n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parked(context: u64) -> Parked {
        let id = || RawValue::from_string("1".into()).unwrap();
        Parked {
            key: ScopeKey {
                upstream: 0,
                context,
            },
            asked: id(),
            answers_as: id(),
            rest: StreamRest {
                session: HeaderMap::new(),
                splitter: Splitter::new(1024),
                body: axum::body::Body::empty(),
                listening: None,
            },
        }
    }

    #[test]
    fn a_round_is_taken_once_and_only_by_its_scope() {
        let rounds = Rounds::default();
        let state = Rounds::state();
        assert_ne!(state, Rounds::state(), "each state is new");
        rounds.park(state.clone(), parked(7));
        let other = ScopeKey {
            upstream: 0,
            context: 8,
        };
        assert!(rounds.take(&state, other).is_none(), "another scope");
        let mine = ScopeKey {
            upstream: 0,
            context: 7,
        };
        assert!(rounds.take(&state, mine).is_some());
        assert!(rounds.take(&state, mine).is_none(), "used once");
    }

    #[test]
    fn a_question_goes_to_the_one_call_waiting_and_to_none_of_several() {
        let questions = Arc::new(Questions::default());
        let asked = br#"{"jsonrpc":"2.0","id":3,"method":"roots/list"}"#;
        assert!(
            matches!(questions.offer(asked), Offered::Left),
            "none waits"
        );
        let mut one = questions.listen();
        assert!(matches!(questions.offer(asked), Offered::Taken));
        assert_eq!(one.rx.try_recv().unwrap().method, "roots/list");
        let note = br#"{"jsonrpc":"2.0","method":"notifications/message"}"#;
        assert!(
            matches!(questions.offer(note), Offered::Left),
            "not a question"
        );
        let _two = questions.listen();
        let Offered::Ambiguous(refusal) = questions.offer(asked) else {
            panic!("two wait")
        };
        let refusal: serde_json::Value = serde_json::from_slice(&refusal).unwrap();
        assert_eq!(refusal["id"], 3);
        assert!(one.rx.try_recv().is_err(), "neither call is asked");
        drop(one);
        assert!(matches!(questions.offer(asked), Offered::Taken), "one left");
    }

    #[test]
    fn rounds_are_bounded_and_the_oldest_goes() {
        let rounds = Rounds::default();
        let first = Rounds::state();
        rounds.park(first.clone(), parked(1));
        std::thread::sleep(Duration::from_millis(2));
        for _ in 0..MAX_ROUNDS {
            rounds.park(Rounds::state(), parked(1));
        }
        assert_eq!(rounds.waiting.locked().len(), MAX_ROUNDS);
        let key = ScopeKey {
            upstream: 0,
            context: 1,
        };
        assert!(rounds.take(&first, key).is_none(), "the oldest made room");
    }
}
