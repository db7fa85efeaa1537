//! The channel between a stdio child's output and one client's stream under `serve -- CMD`,
//! bounded in messages and in bytes: a server's messages may each be as long as
//! `limits.max_response_bytes`, so a count alone would let one stream of a slow client hold
//! a gigabyte.

use bytes::Bytes;
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

pub(crate) use mpsc::error::TrySendError;

/// Messages held for one stream.
const MESSAGES: usize = 64;

/// Bytes held for one stream. One message longer than this still goes, alone.
const BYTES: usize = 4 << 20;

/// A message and the room it takes, given back when the stream takes it.
struct Held {
    line: Bytes,
    _room: OwnedSemaphorePermit,
}

/// The child's end of a stream.
#[derive(Clone)]
pub(crate) struct Sender {
    tx: mpsc::Sender<Held>,
    room: Arc<Semaphore>,
}

/// The client's end of a stream.
pub(crate) struct Receiver(mpsc::Receiver<Held>);

pub(crate) fn channel() -> (Sender, Receiver) {
    let (tx, rx) = mpsc::channel(MESSAGES);
    let room = Arc::new(Semaphore::new(BYTES));
    (Sender { tx, room }, Receiver(rx))
}

/// The room `line` takes: its length, and at most all of it.
fn cost(line: &Bytes) -> u32 {
    u32::try_from(line.len().min(BYTES)).expect("BYTES fits in u32")
}

impl Sender {
    /// Sends `line` when the stream has room for it.
    pub(crate) fn try_send(&self, line: Bytes) -> Result<(), TrySendError<Bytes>> {
        if self.tx.is_closed() {
            return Err(TrySendError::Closed(line));
        }
        let Ok(room) = self.room.clone().try_acquire_many_owned(cost(&line)) else {
            return Err(TrySendError::Full(line));
        };
        self.tx
            .try_send(Held { line, _room: room })
            .map_err(|e| match e {
                TrySendError::Full(h) => TrySendError::Full(h.line),
                TrySendError::Closed(h) => TrySendError::Closed(h.line),
            })
    }

    /// Waits until the stream has room for `line`; `None`: the stream is gone. Dropped before
    /// it is done, it leaves the stream as it was.
    pub(crate) async fn room_for(&self, line: &Bytes) -> Option<Room> {
        // A stream's receiver dropped gives back the room of all it held, so this wait ends.
        let bytes = self
            .room
            .clone()
            .acquire_many_owned(cost(line))
            .await
            .ok()?;
        let slot = self.tx.clone().reserve_owned().await.ok()?;
        Some(Room { slot, bytes })
    }

    pub(crate) fn same_channel(&self, other: &Sender) -> bool {
        self.tx.same_channel(&other.tx)
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

/// Room reserved on a stream for one message.
pub(crate) struct Room {
    slot: mpsc::OwnedPermit<Held>,
    bytes: OwnedSemaphorePermit,
}

impl Room {
    pub(crate) fn send(self, line: Bytes) {
        self.slot.send(Held {
            line,
            _room: self.bytes,
        });
    }
}

impl Receiver {
    /// The next message; `None` once the child's end is gone and nothing is held.
    pub(crate) async fn recv(&mut self) -> Option<Bytes> {
        self.0.recv().await.map(|h| h.line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stream_holds_what_its_bytes_allow_and_takes_more_as_it_is_read() {
        let (tx, mut rx) = channel();
        let mib = Bytes::from(vec![b'x'; 1 << 20]);
        for _ in 0..4 {
            tx.try_send(mib.clone()).expect("room for 4 MiB");
        }
        let full = tx.try_send(Bytes::from_static(b"{}"));
        assert!(matches!(full, Err(TrySendError::Full(_))), "{full:?}");
        let waiting = tx.room_for(&mib);
        tokio::pin!(waiting);
        assert!(futures_util::FutureExt::now_or_never(&mut waiting).is_none());
        assert_eq!(rx.recv().await.expect("held").len(), 1 << 20);
        waiting
            .await
            .expect("room once one is read")
            .send(mib.clone());
    }

    #[tokio::test]
    async fn a_message_longer_than_the_bound_goes_alone() {
        let (tx, mut rx) = channel();
        let big = Bytes::from(vec![b'x'; BYTES + 1]);
        tx.try_send(big.clone()).expect("an empty stream takes it");
        let full = tx.try_send(Bytes::from_static(b"{}"));
        assert!(matches!(full, Err(TrySendError::Full(_))), "{full:?}");
        assert_eq!(rx.recv().await.expect("held").len(), BYTES + 1);
        tx.try_send(big).expect("taken, room again");
    }

    #[tokio::test]
    async fn a_stream_holds_a_bounded_count_of_small_messages() {
        let (tx, rx) = channel();
        for _ in 0..MESSAGES {
            tx.try_send(Bytes::from_static(b"{}")).expect("room");
        }
        let full = tx.try_send(Bytes::from_static(b"{}"));
        assert!(matches!(full, Err(TrySendError::Full(_))), "{full:?}");
        drop(rx);
        let gone = tx.try_send(Bytes::from_static(b"{}"));
        assert!(matches!(gone, Err(TrySendError::Closed(_))), "{gone:?}");
        assert!(tx.room_for(&Bytes::new()).await.is_none());
    }
}
