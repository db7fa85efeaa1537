//! How often a log line that something outside toolgate can repeat is written. A server
//! that is down, a client that sends the same oversized handshake again, a server whose
//! listings cannot be read: each repeats its cause per request or per session, and a line
//! for each would bury every other line (past 10,000 queued, the log writer drops lines)
//! while saying nothing new.

use crate::locks::MutexExt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long the same kind of line goes unsaid after it was said.
pub(crate) const SAID_AGAIN_AFTER: Duration = Duration::from_secs(10);

/// What a line said at a [`LogRate`] adds, for the reader who sees it once.
pub(crate) const AT_RATE: &str = "(the same again is said at most once each 10 s; unsaid counts those not said since the last line)";

/// The rate of one source's lines: the first of a kind is said, the same kind again at most
/// once each [`SAID_AGAIN_AFTER`] with how many went unsaid meanwhile. A line of another
/// kind is said at once (a server that answered late where it had refused connections says
/// something new). Those not said are for the caller to write at `DEBUG`.
#[derive(Default)]
pub(crate) struct LogRate(Mutex<Option<Said>>);

/// The last line said, and how many came after it unsaid.
struct Said {
    kind: &'static str,
    at: Instant,
    unsaid: u64,
}

impl LogRate {
    /// For a process-wide source, as a `static`.
    pub(crate) const fn new() -> LogRate {
        LogRate(Mutex::new(None))
    }

    /// Whether a line of `kind` is said now; if so, with how many went unsaid since the
    /// last line that was.
    pub(crate) fn say(&self, kind: &'static str) -> Option<u64> {
        self.say_at(kind, Instant::now())
    }

    fn say_at(&self, kind: &'static str, now: Instant) -> Option<u64> {
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
    fn the_same_kind_is_said_once_per_window_with_the_count_between() {
        let rate = LogRate::new();
        let (down, late) = ("unreachable", "timeout");
        let t0 = Instant::now();
        assert_eq!(rate.say_at(down, t0), Some(0));
        assert_eq!(rate.say_at(down, t0 + Duration::from_secs(1)), None);
        assert_eq!(rate.say_at(down, t0 + Duration::from_secs(9)), None);
        assert_eq!(rate.say_at(down, t0 + SAID_AGAIN_AFTER), Some(2));
        // Another kind is said at once, and counts what the first left unsaid.
        assert_eq!(rate.say_at(down, t0 + SAID_AGAIN_AFTER), None);
        assert_eq!(rate.say_at(late, t0 + SAID_AGAIN_AFTER), Some(1));
        assert_eq!(rate.say_at(late, t0 + SAID_AGAIN_AFTER), None);
    }
}
