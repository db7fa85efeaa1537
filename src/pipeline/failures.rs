//! What the log says when requests to a server get no usable answer. A server that is down
//! fails every request sent to it; a line for each would bury every other line (and past
//! 10,000 queued, the log writer drops lines) while saying nothing new, and each failure is
//! counted anyway (`toolgate_requests_total{outcome="upstream_error"}`, and a call's in
//! `toolgate_tool_calls_total`). So the first failure of a kind is said at `WARN`, the same
//! kind again at most once each [`SAID_AGAIN_AFTER`] with how many went unsaid meanwhile,
//! and the rest at `DEBUG`. A failure of another kind (the server answered late where it had
//! refused connections) is said at once.
//!
//! Under `errors.mask_internal` each failure is said with the reference its client was given
//! instead ([`super::failed`]): the reference is what an operator looks up.

use crate::locks::MutexExt;
use std::fmt::Display;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long the same kind of failure of one server goes unsaid at `WARN` after it was said.
pub(crate) const SAID_AGAIN_AFTER: Duration = Duration::from_secs(10);

/// One server's failures as the log said them; see the module documentation.
#[derive(Default)]
pub struct FailureLog(Mutex<Option<Said>>);

/// The last failure said at `WARN`, and how many came after it unsaid.
struct Said {
    kind: &'static str,
    at: Instant,
    unsaid: u64,
}

impl FailureLog {
    /// A request to `upstream` got no usable answer, for reason `e` of `kind`
    /// ([`crate::error::UpstreamError::kind`], or the listing's own).
    pub(crate) fn failed(&self, upstream: &str, kind: &'static str, e: &dyn Display) {
        match self.tell(kind, Instant::now()) {
            Some(unsaid) => tracing::warn!(
                upstream,
                error = %e,
                kind,
                unsaid,
                "a request got no usable answer from the tool server (the same again is said at most once each 10 s; unsaid: how many were not since the last line)"
            ),
            None => {
                tracing::debug!(upstream, error = %e, "a request got no usable answer from the tool server")
            }
        }
    }

    /// Whether a failure of `kind` at `now` is said at `WARN`, with how many went unsaid
    /// since the last line that was.
    fn tell(&self, kind: &'static str, now: Instant) -> Option<u64> {
        let mut said = self.0.locked();
        if let Some(s) = said.as_mut()
            && s.kind == kind
            && now.saturating_duration_since(s.at) < SAID_AGAIN_AFTER
        {
            s.unsaid += 1;
            return None;
        }
        let unsaid = said.as_ref().map_or(0, |s| s.unsaid);
        *said = Some(Said {
            kind,
            at: now,
            unsaid: 0,
        });
        Some(unsaid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_failure_is_said_once_per_window_with_the_count_between() {
        let log = FailureLog::default();
        let (down, late) = ("unreachable", "timeout");
        let t0 = Instant::now();
        assert_eq!(log.tell(down, t0), Some(0));
        assert_eq!(log.tell(down, t0 + Duration::from_secs(1)), None);
        assert_eq!(log.tell(down, t0 + Duration::from_secs(9)), None);
        assert_eq!(log.tell(down, t0 + SAID_AGAIN_AFTER), Some(2));
        // Another kind is said at once, and counts what the first left unsaid.
        assert_eq!(log.tell(down, t0 + SAID_AGAIN_AFTER), None);
        assert_eq!(log.tell(late, t0 + SAID_AGAIN_AFTER), Some(1));
        assert_eq!(log.tell(late, t0 + SAID_AGAIN_AFTER), None);
    }
}
