//! Bodies read whole under a limit: a client's request, or an upstream's answer that a rule
//! must read (and that passes on as it came when it is over the limit).

use bytes::Bytes;
use http_body::Body as _;
use http_body_util::BodyExt;

/// A body read whole up to a limit. Over the limit, the bytes read so far and the rest of
/// the body come back, so the caller can still pass everything through.
pub enum Collected<B> {
    Whole(Bytes),
    TooLarge(B),
}

/// Why a request body could not be read.
#[derive(Debug)]
pub enum ReadError {
    TooLarge,
    Broken(String),
}

/// What a body has delivered so far. Most bodies arrive in one frame, which is kept as it
/// came, without a copy.
#[derive(Default)]
struct Gathered {
    first: Option<Bytes>,
    buf: bytes::BytesMut,
}

impl Gathered {
    /// Adds a frame; `rest` says how much more the body says is to come, asked only of a
    /// body of many frames, which is gathered into one buffer of its whole length where it
    /// declared one, not a buffer grown by doubling (which holds up to twice the body).
    fn push(&mut self, data: Bytes, rest: impl FnOnce() -> u64) {
        match self.first.take() {
            None if self.buf.is_empty() => self.first = Some(data),
            held => {
                if let Some(h) = held {
                    let rest = usize::try_from(rest()).unwrap_or(0);
                    self.buf.reserve(h.len() + data.len() + rest);
                    self.buf.extend_from_slice(&h);
                }
                self.buf.extend_from_slice(&data);
            }
        }
    }

    fn len(&self) -> usize {
        self.first.as_ref().map_or(self.buf.len(), Bytes::len)
    }

    fn into_bytes(mut self) -> Bytes {
        self.first.take().unwrap_or_else(|| self.buf.freeze())
    }
}

/// Reads a body until its end or until more than `limit` bytes have come; `Ok(false)`
/// means over the limit, with what was read in `got`.
///
/// It stops at the length the body declared rather than polling once more for its end: on
/// hyper's HTTP/1 server that last poll is answered by the connection task that is running
/// it, a self-wake that costs a requeue per request (and, on a work-stealing scheduler, a
/// futex wake of another thread).
async fn gather<B>(body: &mut B, limit: usize, got: &mut Gathered) -> Result<bool, B::Error>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    while !body.is_end_stream() {
        let Some(frame) = body.frame().await else {
            break;
        };
        if let Ok(data) = frame?.into_data() {
            // What is still to come, as far as the limit: a declared length is a claim.
            got.push(data, || body.size_hint().lower().min(limit as u64));
            if got.len() > limit {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Reads a request body whole, refusing more than `limit` bytes.
pub async fn read_limited<B>(mut body: B, limit: usize) -> Result<Bytes, ReadError>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    // A declared length (Content-Length) over the limit is refused before reading.
    if body.size_hint().lower() > limit as u64 {
        return Err(ReadError::TooLarge);
    }
    let mut got = Gathered::default();
    match gather(&mut body, limit, &mut got).await {
        Ok(true) => Ok(got.into_bytes()),
        Ok(false) => Err(ReadError::TooLarge),
        Err(e) => Err(ReadError::Broken(e.to_string())),
    }
}

/// Reads an upstream body whole when it fits in `limit`; otherwise hands back a body that
/// replays what was read and streams the rest.
pub async fn collect_upstream<B>(
    mut body: B,
    limit: usize,
) -> Result<Collected<axum::body::Body>, B::Error>
where
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let mut got = Gathered::default();
    if gather(&mut body, limit, &mut got).await? {
        return Ok(Collected::Whole(got.into_bytes()));
    }
    let head = got.into_bytes();
    let head = futures_util::stream::once(async move { Ok::<_, B::Error>(head) });
    use futures_util::StreamExt;
    Ok(Collected::TooLarge(axum::body::Body::from_stream(
        head.chain(body.into_data_stream()),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Declares its length and delivers it in one frame, but never ends its stream: a reader
    /// that polls past the declared end waits forever.
    struct Declared(Option<Bytes>, u64);

    impl http_body::Body for Declared {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
            match self.0.take() {
                Some(d) => std::task::Poll::Ready(Some(Ok(http_body::Frame::data(d)))),
                None => std::task::Poll::Pending,
            }
        }
        fn is_end_stream(&self) -> bool {
            self.0.is_none()
        }
        fn size_hint(&self) -> http_body::SizeHint {
            http_body::SizeHint::with_exact(self.1)
        }
    }

    fn chunks(
        parts: Vec<Result<&'static str, &'static str>>,
    ) -> http_body_util::StreamBody<
        impl futures_util::Stream<Item = Result<http_body::Frame<Bytes>, &'static str>> + Unpin,
    > {
        http_body_util::StreamBody::new(futures_util::stream::iter(
            parts
                .into_iter()
                .map(|p| p.map(|s| http_body::Frame::data(Bytes::from_static(s.as_bytes())))),
        ))
    }

    #[tokio::test]
    async fn a_body_is_read_up_to_its_declared_end_and_no_further() {
        let body = Declared(Some(Bytes::from_static(b"{\"id\":1}")), 8);
        let read = tokio::time::timeout(Duration::from_secs(5), read_limited(body, 100)).await;
        assert_eq!(read.expect("no poll past the end").unwrap(), "{\"id\":1}");
    }

    #[tokio::test]
    async fn chunked_bodies_are_joined_and_limited() {
        let whole = read_limited(chunks(vec![Ok("ab"), Ok("cd"), Ok("e")]), 5).await;
        assert_eq!(whole.unwrap(), "abcde");
        let over = read_limited(chunks(vec![Ok("abc"), Ok("def")]), 5).await;
        assert!(matches!(over, Err(ReadError::TooLarge)));
        let declared_over = read_limited(Declared(Some(Bytes::from_static(b"x")), 6), 5).await;
        assert!(matches!(declared_over, Err(ReadError::TooLarge)));
        let broken = read_limited(chunks(vec![Ok("ab"), Err("reset")]), 5).await;
        assert!(matches!(broken, Err(ReadError::Broken(e)) if e == "reset"));
    }
}
