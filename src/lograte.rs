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

/// The rate of one source's lines, per kind: the first of a kind is said, the same kind
/// again at most once each [`SAID_AGAIN_AFTER`] with how many of it went unsaid meanwhile.
/// Those not said are for the caller to write at `DEBUG`. Kinds are the code's own names, so
/// the kinds kept are as many as the code has.
#[derive(Default)]
pub(crate) struct LogRate(Mutex<Vec<Said>>);

/// When a kind was last said, and how many of it came after unsaid.
struct Said {
    kind: &'static str,
    at: Instant,
    unsaid: u64,
}

impl LogRate {
    /// For a process-wide source, as a `static`.
    pub(crate) const fn new() -> LogRate {
        LogRate(Mutex::new(Vec::new()))
    }

    /// Whether a line of `kind` is said now; if so, with how many of it went unsaid since
    /// the last that was.
    pub(crate) fn say(&self, kind: &'static str) -> Option<u64> {
        self.say_at(kind, Instant::now())
    }

    fn say_at(&self, kind: &'static str, now: Instant) -> Option<u64> {
        let mut said = self.0.locked();
        let Some(s) = said.iter_mut().find(|s| s.kind == kind) else {
            said.push(Said {
                kind,
                at: now,
                unsaid: 0,
            });
            return Some(0);
        };
        if now.saturating_duration_since(s.at) < SAID_AGAIN_AFTER {
            s.unsaid += 1;
            return None;
        }
        s.at = now;
        Some(std::mem::take(&mut s.unsaid))
    }
}

/// A line at `$rate` for `$kind`: `WARN` with `unsaid` and [`AT_RATE`] when it is said,
/// `DEBUG` when it is not. `$fields` are `tracing`'s, each followed by a comma.
macro_rules! warn_at_rate {
    ($rate:expr, $kind:expr, { $($fields:tt)* }, $said:expr) => {
        match $rate.say($kind) {
            Some(unsaid) => tracing::warn!($($fields)* unsaid, "{} {}", $said, $crate::lograte::AT_RATE),
            None => tracing::debug!($($fields)* "{}", $said),
        }
    };
}
pub(crate) use warn_at_rate;

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
        // Another kind is said at once, and has a window of its own.
        assert_eq!(rate.say_at(late, t0 + Duration::from_secs(9)), Some(0));
        assert_eq!(rate.say_at(late, t0 + SAID_AGAIN_AFTER), None);
        assert_eq!(rate.say_at(down, t0 + SAID_AGAIN_AFTER), Some(2));
        assert_eq!(rate.say_at(down, t0 + SAID_AGAIN_AFTER), None);
        assert_eq!(rate.say_at(down, t0 + SAID_AGAIN_AFTER * 2), Some(1));
    }
}
