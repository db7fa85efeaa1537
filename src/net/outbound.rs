//! How many connections to servers the process holds open at once, every server's
//! together (the telemetry collector's among them): at most a quarter of its descriptor
//! limit.
//!
//! Why: each connection to a server is a descriptor, and HTTP/1 carries one request at a
//! time, so a pool opens as many connections as requests wait on it. Client connections
//! are held to half the descriptor limit (`limits.max_connections`), but over HTTP/2 one
//! client connection carries up to 200 requests at once. Unbounded, two such connections of
//! slow calls take every descriptor of a toolgate limited to 256: its admin listener then
//! accepts no probe (a liveness check fails, and the pod is restarted with every session
//! in it), no new client can connect, and the calls that find no descriptor fail as if the
//! server were down. Held to a quarter, the servers' connections leave the last quarter to
//! the admin listener, stdio servers' pipes and Redis.
//!
//! A request that would need a connection past the bound is refused at once, unsent
//! ([`UpstreamError::Busy`]), rather than queued: it is safe to send again. A kept
//! connection, idle between requests, holds its place until it closes, so the bound counts
//! what the process holds, not only what is in use; and a connection is kept after its
//! answer only while three quarters of the places or fewer are taken ([`Place::keepable`]),
//! so that what one server's burst leaves idle (a pool keeps up to 1,024 connections, a
//! minute each) cannot keep another server's requests out.
//!
//! The stdio servers toolgate starts are held to the last quarter the same way
//! ([`Outbound::children`]): each holds [`CHILD_DESCRIPTORS`] descriptors for as long as
//! it runs, and `stdio.max_sessions` (100 by default, for each stdio server) would
//! otherwise take 500 of a toolgate limited to 1,024, past what the quarter holds. A session
//! past that bound is refused unstarted, as busy.
//!
//! The limit is read once, by the first pool, after the binary has raised its own
//! (`cli/main.rs`); a bound of fewer than 16 is raised to 16, and where the limit cannot be
//! read there is none.

use crate::error::UpstreamError;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Descriptors one stdio server holds in toolgate while it runs: its three pipes, and the
/// process handles of the server and of its group's keeper (counted on Linux, 2026-12-03).
const CHILD_DESCRIPTORS: usize = 5;

/// Descriptors of the last quarter kept from stdio servers, for the admin listener, Redis
/// and the log file.
const KEPT_FROM_CHILDREN: usize = 32;

/// Connections open at once, and how many may be.
#[derive(Debug)]
pub(crate) struct Outbound {
    open: AtomicUsize,
    max: usize,
    /// Why one more is refused, given the bound.
    refusal: fn(usize) -> UpstreamError,
}

/// One open connection's place, or one running stdio server's, given back when it is
/// dropped: kept with what holds the descriptors for as long as it holds them.
#[derive(Debug)]
pub(crate) struct Place(Arc<Outbound>);

impl Outbound {
    /// The process's bound, every pool's together.
    pub(crate) fn process() -> &'static Arc<Outbound> {
        static PROCESS: OnceLock<Arc<Outbound>> = OnceLock::new();
        PROCESS.get_or_init(|| {
            let max = descriptor_limit().map_or(usize::MAX, |d| (d / 4).max(16));
            Arc::new(Outbound::at_most(max))
        })
    }

    /// The stdio servers the process runs at once, every server's together: as many as the
    /// last quarter of the descriptor limit holds, [`KEPT_FROM_CHILDREN`] kept, and at least
    /// four. A place is taken as a server starts and given back once it has ended.
    pub(crate) fn children() -> &'static Arc<Outbound> {
        static CHILDREN: OnceLock<Arc<Outbound>> = OnceLock::new();
        CHILDREN.get_or_init(|| {
            let room = |d: usize| (d / 4).saturating_sub(KEPT_FROM_CHILDREN) / CHILD_DESCRIPTORS;
            let max = descriptor_limit().map_or(usize::MAX, |d| room(d).max(4));
            Arc::new(Outbound {
                refusal: UpstreamError::too_many_servers,
                ..Outbound::at_most(max)
            })
        })
    }

    pub(crate) fn at_most(max: usize) -> Outbound {
        Outbound {
            open: AtomicUsize::new(0),
            max: max.max(1),
            refusal: UpstreamError::busy,
        }
    }

    /// A place for one more connection, or why there is none. The count never passes the
    /// bound, not even for a refusal's moment: the gauge reads it.
    pub(crate) fn take(self: &Arc<Self>) -> Result<Place, UpstreamError> {
        let max = self.max;
        let more = |open: usize| (open < max).then_some(open + 1);
        match self
            .open
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, more)
        {
            Ok(_) => Ok(Place(self.clone())),
            Err(_) => Err((self.refusal)(max)),
        }
    }

    /// Connections open now.
    pub(crate) fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Connections open now, and how many may be, for the gauges.
    pub(crate) fn gauges(&self) -> (usize, usize) {
        (self.open(), self.max)
    }
}

impl Place {
    /// Whether its connection may be kept for the next request once its answer is read:
    /// while at most three quarters of the places are taken, idle connections never hold
    /// the last quarter.
    pub(crate) fn keepable(&self) -> bool {
        let outbound = &self.0;
        outbound.open.load(Ordering::Relaxed) <= outbound.max - outbound.max / 4
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The process's soft limit on open descriptors, which the bounds on connections are
/// shares of; `None` where it cannot be read.
pub(crate) fn descriptor_limit() -> Option<usize> {
    use nix::sys::resource::{Resource, getrlimit};
    let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).ok()?;
    Some(usize::try_from(soft).unwrap_or(usize::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_given_back_as_connections_close() {
        let outbound = Arc::new(Outbound::at_most(2));
        let (a, b) = (outbound.take().unwrap(), outbound.take().unwrap());
        let refused = outbound.take().unwrap_err();
        assert_eq!(refused.kind(), "busy");
        assert_eq!(outbound.open(), 2, "a refusal holds nothing");
        drop(a);
        let c = outbound.take().unwrap();
        drop((b, c));
        assert_eq!(outbound.open(), 0);
    }

    #[test]
    fn refusals_never_show_more_places_taken_than_there_are() {
        let outbound = Arc::new(Outbound::at_most(2));
        let _held = (outbound.take().unwrap(), outbound.take().unwrap());
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    assert!(outbound.take().is_err());
                }
            });
            let past = (0..100_000).filter(|_| outbound.open() > 2).count();
            stop.store(true, Ordering::Relaxed);
            assert_eq!(past, 0, "times the gauge was past the bound");
        });
    }

    #[test]
    fn a_connection_is_kept_only_while_a_quarter_of_the_places_is_left() {
        let outbound = Arc::new(Outbound::at_most(4));
        let places: Vec<_> = (0..3).map(|_| outbound.take().unwrap()).collect();
        assert!(places.iter().all(Place::keepable), "three of four taken");
        let fourth = outbound.take().unwrap();
        assert!(!fourth.keepable() && !places[0].keepable());
    }
}
