//! A small number per thread, for state that every request writes.
//!
//! A value written by both worker threads on every request has its cache line passed between
//! the cores each time. Kept in one slot per thread, each on its own line, the writes stay on
//! their core; readers that need the whole (a metrics scrape, a pool that finds its own slot
//! empty) visit every slot.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Slots per value: threads beyond this share one, which is still correct.
pub const SLOTS: usize = 8;

/// This thread's slot.
pub fn slot() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SLOTS;
    }
    SLOT.with(|s| *s)
}
