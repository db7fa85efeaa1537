//! A stdio server of the handshake era that asks its client something (`elicitation/create`,
//! `sampling/createMessage`, `roots/list`) while a bridged 2026-07-28 client's call waits on
//! it: the question becomes an input-required round (SEP-2322, `upstream::rounds`), as on an
//! HTTP server's stream. The client's retry brings the answer, which is written to the child,
//! and the call is waited on again.
//!
//! Over stdio nothing ties a server's request to the call it is for: a question goes to the
//! bridged call waiting on that child ([`Questions`]; none when several wait), and one that
//! comes while none waits goes to the client as it came.

use super::child::{ChildProcess, Given, Waiting};
#[cfg(doc)]
use super::rounds::Questions;
use super::rounds::{Parked, Rounds, Unresumed};
use crate::catalog::ScopeKey;
use crate::error::UpstreamError;
use crate::pipeline::bridge::{self, Retry};
use bytes::Bytes;
use serde_json::value::RawValue;
use std::time::Duration;

/// What a bridged client is given for its call.
pub(crate) enum Answered {
    /// The server's answer (or toolgate's, to a call its client cancelled), under the
    /// client's id.
    Server(Given),
    /// The server asked first: an input-required round, the call parked under its state.
    Round(Vec<u8>),
}

impl ChildProcess {
    /// A bridged 2026-07-28 client's call (`line`, under `id`), or its retry of one of the
    /// call's rounds, written to the child now: what the call waits on, and the id the server
    /// answers it under. The same for every front. `before` is given that id before anything
    /// is written, so that what the child then sends about the call has a place to go.
    pub(crate) fn bridged_call<T>(
        &self,
        line: Bytes,
        id: &RawValue,
        key: ScopeKey,
        before: impl FnOnce(&RawValue) -> T,
    ) -> Result<(Waiting, Box<RawValue>, T), Unresumed> {
        match bridge::retry(&line) {
            Some(retry) => self.resume(&retry, key, before),
            None => {
                let made = before(id);
                match self.start_bridged(line, id.get()) {
                    Ok(waiting) => Ok((waiting, id.to_owned(), made)),
                    Err(e) => Err(Unresumed::Unavailable(e)),
                }
            }
        }
    }

    /// Writes a bridged call (`line`, under `id`, raw JSON text) now, listening for the
    /// questions the child asks before it answers.
    fn start_bridged(&self, line: Bytes, id: &str) -> Result<Waiting, UpstreamError> {
        // Listening first: a question may come before `start` returns.
        let listening = self.questions.listen();
        let owed = self.start(line, id)?;
        Ok(Waiting { owed, listening })
    }

    /// The client's answer to its call (`client_id`) waiting on this child: the server's
    /// (which comes under `answers_as`), or a round when the server asks first.
    pub(crate) async fn bridged_answer(
        &self,
        mut waiting: Waiting,
        (answers_as, client_id): (&RawValue, &RawValue),
        key: ScopeKey,
        timeout: Duration,
    ) -> Result<Answered, UpstreamError> {
        let question = tokio::select! {
            answer = waiting.owed.next(timeout) => {
                let under_client_id = |a| bridge::under_id(a, answers_as, client_id);
                return answer.map(|given| Answered::Server(given.map(under_client_id)));
            }
            Some(q) = waiting.listening.recv() => q,
        };
        let state = Rounds::state();
        let round = bridge::input_required(client_id, &question, &state);
        let parked = Parked {
            key,
            asked: question.id,
            answers_as: answers_as.to_owned(),
            rest: waiting,
        };
        self.rounds.park(state, parked);
        Ok(Answered::Round(round))
    }

    /// A bridged client's retry of a round on this child: its answer is written to the
    /// child's question, and the call it parked is handed back with the id the server answers
    /// it under.
    fn resume<T>(
        &self,
        retry: &Retry,
        key: ScopeKey,
        before: impl FnOnce(&RawValue) -> T,
    ) -> Result<(Waiting, Box<RawValue>, T), Unresumed> {
        let (parked, result) = self.rounds.answered(retry, key)?;
        let made = before(&parked.answers_as);
        let answer = Bytes::from(bridge::answer_to(&parked.asked, result));
        self.send(answer).map_err(Unresumed::Unavailable)?;
        Ok((parked.rest, parked.answers_as, made))
    }
}
