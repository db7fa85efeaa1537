//! What toolgate sends a child (a process's stdin, an HTTP+SSE session's posts), queued in
//! order for the one task that writes it, and bounded: a child that stops reading (a stuck
//! server, or a busy one that reads only between calls) would otherwise make every request
//! sent to it meanwhile wait in toolgate's memory, past its own timeout, for good. Past
//! [`MAX_WAITING`] bytes, what is sent is refused at once, and its client told why.

use bytes::Bytes;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::mpsc;

/// Bytes that may wait for a child: room for thousands of calls of the usual size, and for
/// several of the largest a client may send (`limits.max_body_bytes`, 4 MiB by default).
/// One message always goes when nothing waits, whatever its size.
pub(crate) const MAX_WAITING: usize = 16 << 20;

/// Why a message was not queued.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The writer is gone: the child has ended.
    Closed,
    /// This many bytes already wait for a child that is not reading them.
    Full(usize),
}

/// The sending side.
pub(crate) struct Input {
    lines: mpsc::UnboundedSender<Bytes>,
    waiting: Arc<AtomicUsize>,
}

/// The writer's side: each message in order, no longer counted once taken.
pub(crate) struct Lines {
    lines: mpsc::UnboundedReceiver<Bytes>,
    waiting: Arc<AtomicUsize>,
}

pub(crate) fn input() -> (Input, Lines) {
    let (tx, rx) = mpsc::unbounded_channel();
    let waiting = Arc::<AtomicUsize>::default();
    let input = Input {
        lines: tx,
        waiting: waiting.clone(),
    };
    (input, Lines { lines: rx, waiting })
}

impl Input {
    pub(crate) fn send(&self, line: Bytes) -> Result<(), Refused> {
        let waiting = self.waiting.load(Ordering::Acquire);
        if waiting > 0 && waiting + line.len() > MAX_WAITING {
            return Err(Refused::Full(waiting));
        }
        self.waiting.fetch_add(line.len(), Ordering::AcqRel);
        self.lines.send(line).map_err(|_| Refused::Closed)
    }
}

impl Lines {
    pub(crate) async fn recv(&mut self) -> Option<Bytes> {
        let line = self.lines.recv().await?;
        self.waiting.fetch_sub(line.len(), Ordering::AcqRel);
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn what_waits_is_bounded_and_freed_as_it_is_taken() {
        let (input, mut lines) = input();
        let big = Bytes::from(vec![b'x'; MAX_WAITING + 1]);
        assert_eq!(
            input.send(big.clone()),
            Ok(()),
            "one goes when nothing waits"
        );
        assert_eq!(
            input.send(Bytes::from_static(b"{}")),
            Err(Refused::Full(MAX_WAITING + 1))
        );
        assert_eq!(lines.recv().await, Some(big));
        assert_eq!(input.send(Bytes::from_static(b"{}")), Ok(()));
        drop(lines);
        assert_eq!(input.send(Bytes::from_static(b"{}")), Err(Refused::Closed));
    }
}
