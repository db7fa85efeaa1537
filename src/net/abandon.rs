//! Work to do when a client gives up on an exchange before its end: the future serving it is
//! dropped, or the body of its answer is dropped before its last frame. A 2026-07-28 client
//! cancels a request that way, and a server behind toolgate that cannot see it (it answers
//! toolgate, not the client) must be told.

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Runs its action when dropped, unless [`Abandon::disarm`]ed first.
pub(crate) struct Abandon(Option<Box<dyn FnOnce() + Send>>);

impl Abandon {
    pub(crate) fn new(action: impl FnOnce() + Send + 'static) -> Abandon {
        Abandon(Some(Box::new(action)))
    }

    /// The exchange ended: nothing is left to do.
    pub(crate) fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for Abandon {
    fn drop(&mut self) {
        if let Some(action) = self.0.take() {
            action();
        }
    }
}

/// A body whose [`Abandon`] runs when it is dropped before its end.
pub(crate) struct UntilEnd<B> {
    body: B,
    abandon: Option<Abandon>,
}

impl<B> UntilEnd<B> {
    pub(crate) fn new(body: B, abandon: Abandon) -> UntilEnd<B> {
        UntilEnd {
            body,
            abandon: Some(abandon),
        }
    }
}

impl<B> Body for UntilEnd<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if (matches!(polled, Poll::Ready(None)) || self.body.is_end_stream())
            && let Some(a) = self.abandon.take()
        {
            a.disarm();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counted() -> (Abandon, Arc<AtomicUsize>) {
        let runs = Arc::new(AtomicUsize::new(0));
        let r = runs.clone();
        (
            Abandon::new(move || {
                r.fetch_add(1, Ordering::SeqCst);
            }),
            runs,
        )
    }

    #[tokio::test]
    async fn a_body_read_to_its_end_abandons_nothing_and_one_dropped_early_does() {
        let (abandon, runs) = counted();
        let body = UntilEnd::new(Full::new(Bytes::from_static(b"answer")), abandon);
        assert_eq!(body.collect().await.unwrap().to_bytes(), "answer");
        assert_eq!(runs.load(Ordering::SeqCst), 0);

        let (abandon, runs) = counted();
        drop(UntilEnd::new(
            Full::new(Bytes::from_static(b"answer")),
            abandon,
        ));
        assert_eq!(runs.load(Ordering::SeqCst), 1);

        let (abandon, runs) = counted();
        abandon.disarm();
        assert_eq!(runs.load(Ordering::SeqCst), 0);
    }
}
