//! A listener's connections, oldest first, at most a cap. Past it, a new connection takes
//! the place of the oldest one its listener may close (`Closable`), which is closed (its
//! next read fails: `ConnTimers::close`); when none may be, the new one waits for a
//! connection to end.
//!
//! Why not only wait: connections that send no request are each closed
//! `limits.header_timeout` after their accept, but a client that opens them again as fast
//! would hold every place, and a probe or a client with a request to send would wait behind
//! them.

use super::conn_timers::ConnTimers;
use crate::locks::MutexExt;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

/// Which connections a listener closes to make room.
#[derive(Clone, Copy)]
pub(crate) enum Closable {
    /// Those with no request in service: none sent yet, or idle between requests (the admin
    /// listener: its probes and scrapes reconnect).
    NotServing,
    /// Those that have sent no request since their accept (the client listener: a
    /// connection idle between requests may be about to send one, and is left alone). At
    /// any age: a client sends its first request as it connects, and the newest connections
    /// are the last to be closed, so a flood of connections that send none churns through
    /// its own while the listener accepts at full speed.
    NoRequest,
}

/// How often a connection waiting for room looks again, besides when one ends: one being
/// answered may have become idle.
const LOOK_AGAIN: std::time::Duration = std::time::Duration::from_secs(1);

pub(crate) struct Slots {
    held: Mutex<BTreeMap<u64, ConnTimers>>,
    /// Woken when a connection ends.
    freed: Notify,
    next_id: AtomicU64,
    cap: usize,
    closable: Closable,
}

/// A connection's place, given back when dropped.
pub(crate) struct Place {
    slots: Arc<Slots>,
    id: u64,
}

impl Slots {
    pub(crate) fn new(cap: usize, closable: Closable) -> Arc<Slots> {
        Arc::new(Slots {
            held: Mutex::new(BTreeMap::new()),
            freed: Notify::new(),
            next_id: AtomicU64::new(0),
            cap,
            closable,
        })
    }

    /// A place for a connection just accepted, under `timers`, once there is room: looked
    /// for again when a connection ends, and every [`LOOK_AGAIN`].
    pub(crate) async fn take(self: &Arc<Slots>, timers: &ConnTimers) -> Place {
        loop {
            // Made before the look, so that a connection ending after it still wakes it.
            let freed = self.freed.notified();
            if let Some(place) = self.try_take(timers) {
                return place;
            }
            let _ = tokio::time::timeout(LOOK_AGAIN, freed).await;
        }
    }

    fn try_take(self: &Arc<Slots>, timers: &ConnTimers) -> Option<Place> {
        let mut held = self.held.locked();
        if held.len() >= self.cap {
            let (&oldest, _) = held.iter().find(|(_, t)| self.may_close(t))?;
            held.remove(&oldest).expect("found above").close();
        }
        let id = self.next_id.fetch_add(1, Relaxed);
        held.insert(id, timers.clone());
        Some(Place {
            slots: self.clone(),
            id,
        })
    }

    fn may_close(&self, timers: &ConnTimers) -> bool {
        match self.closable {
            Closable::NotServing => !timers.serving(),
            Closable::NoRequest => timers.unserved(),
        }
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.slots.held.locked().remove(&self.id);
        self.slots.freed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::AsyncReadExt;
    use tokio::time::timeout;

    fn timers() -> ConnTimers {
        let s = Duration::from_secs(60);
        ConnTimers::new(s, s, s)
    }

    /// Whether the connection under `timers` was closed: a read fails at once.
    async fn closed(timers: &ConnTimers) -> bool {
        let (_client, server) = tokio::io::duplex(64);
        let read = timeout(
            Duration::from_millis(1),
            timers.io(server).read(&mut [0u8; 8]),
        )
        .await;
        matches!(read, Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionAborted)
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_cap_the_oldest_idle_admin_connection_makes_room() {
        let slots = Slots::new(2, Closable::NotServing);
        let (a, b, c) = (timers(), timers(), timers());
        let (_first, _second) = (slots.take(&a).await, slots.take(&b).await);
        // Both idle: the oldest is closed for a third.
        let third = slots.take(&c).await;
        assert!(closed(&a).await && !closed(&b).await, "the oldest only");
        // Both in service: a fourth waits until one ends.
        let _serving = (b.in_service(false), c.in_service(false));
        let fourth = timeout(Duration::from_secs(5), slots.take(&timers())).await;
        assert!(fourth.is_err(), "every place is serving");
        drop(third);
        let fourth = timeout(Duration::from_secs(1), slots.take(&timers())).await;
        assert!(fourth.is_ok(), "a place once one ends");
        assert!(!closed(&b).await && !closed(&c).await);
    }

    #[tokio::test(start_paused = true)]
    async fn the_client_listener_closes_only_a_connection_that_sent_no_request() {
        let slots = Slots::new(1, Closable::NoRequest);
        let (a, b, c) = (timers(), timers(), timers());
        let _first = slots.take(&a).await;
        let _second = slots.take(&b).await;
        assert!(
            closed(&a).await,
            "no request from the first: closed at once"
        );
        // One that was served is never closed for a newer one.
        drop(b.in_service(false));
        let third = timeout(Duration::from_secs(5), slots.take(&c)).await;
        assert!(third.is_err() && !closed(&b).await);
    }
}
