//! How soon a server's process may be started again after its processes have ended before
//! they said anything, one after another: a server that cannot run (a missing setting, a
//! crash as it loads) would otherwise be started again for each request, at the rate
//! requests come, each start costing a runtime's launch (tens of milliseconds of CPU for
//! Python or Node). As a service manager does it: the wait doubles with each such end, from
//! 100 ms up to 10 s, and one process that speaks (writes any message, its handshake's
//! answer first) ends the run. Meanwhile a request that needs a new process is told why and
//! when, at once, and starts none. A process that ends after it has spoken (a request
//! crashed it) is started again at once: its other clients are not kept waiting for one
//! client's request.

use crate::error::UpstreamError;
use crate::locks::MutexExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

const FIRST_WAIT: Duration = Duration::from_millis(100);
const LONGEST_WAIT: Duration = Duration::from_secs(10);

#[derive(Default)]
pub(crate) struct Restarts(Mutex<Run>);

/// The ends before a word, one after another, how the last one went, and when the next
/// start may be.
#[derive(Default)]
struct Run {
    silent_ends: u32,
    last: String,
    next_start: Option<Instant>,
}

impl Restarts {
    /// A process ended on its own, as `how` says, having `spoken` or not.
    pub(crate) fn ended(&self, spoken: bool, how: &str) {
        self.ended_at(spoken, how, Instant::now());
    }

    fn ended_at(&self, spoken: bool, how: &str, now: Instant) {
        let mut run = self.0.locked();
        if spoken {
            *run = Run::default();
            return;
        }
        run.silent_ends = run.silent_ends.saturating_add(1);
        run.last = crate::text::clipped(how, 200).to_owned();
        let doublings = (run.silent_ends - 1).min(7);
        let wait = FIRST_WAIT.saturating_mul(1 << doublings).min(LONGEST_WAIT);
        run.next_start = Some(now + wait);
    }

    /// Why no process may be started now, if none may.
    pub(crate) fn refused(&self) -> Option<UpstreamError> {
        self.refused_at(Instant::now())
    }

    fn refused_at(&self, now: Instant) -> Option<UpstreamError> {
        let run = self.0.locked();
        let left = (run.next_start?.checked_duration_since(now)).filter(|d| !d.is_zero())?;
        Some(UpstreamError::Unreachable(format!(
            "the tool server {} before it said anything ({} in a row); toolgate starts it again in {} ms",
            run.last,
            run.silent_ends,
            left.as_millis().max(1)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_doubles_with_each_silent_end_and_a_word_ends_the_run() {
        let r = Restarts::default();
        let t0 = Instant::now();
        assert!(
            r.refused_at(t0).is_none(),
            "the first start waits for nothing"
        );
        let waits: Vec<u128> = (0..10)
            .map(|_| {
                r.ended_at(false, "exited with exit status: 3", t0);
                let why = r.refused_at(t0).unwrap().to_string();
                why.rsplit(" in ")
                    .next()
                    .unwrap()
                    .trim_end_matches(" ms")
                    .parse()
                    .unwrap()
            })
            .collect();
        assert_eq!(
            waits,
            [100, 200, 400, 800, 1600, 3200, 6400, 10000, 10000, 10000]
        );
        assert!(
            r.refused_at(t0 + LONGEST_WAIT).is_none(),
            "then it may start"
        );
        let why =
            "the tool server exited with exit status: 3 before it said anything (10 in a row)";
        assert!(r.refused_at(t0).unwrap().to_string().contains(why));
        r.ended_at(true, "exited with exit status: 1", t0);
        assert!(
            r.refused_at(t0).is_none(),
            "a process that spoke ends the run"
        );
        r.ended_at(false, "closed its output", t0);
        assert!(
            r.refused_at(t0 + FIRST_WAIT).is_none(),
            "and the next waits 100 ms"
        );
    }
}
