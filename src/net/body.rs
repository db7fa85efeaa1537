//! Bodies read whole under a limit: a client's request, or an upstream's answer that a rule
//! must read (and that passes on as it came when it is over the limit).

use bytes::Bytes;
use futures_util::FutureExt;
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
    /// What counts the bytes read had no room for more.
    NoRoom,
    Broken(String),
}

/// How reading a body ended.
enum Gathering {
    Whole,
    OverLimit,
    NoRoom,
}

/// What a body has delivered so far. Most bodies arrive in one frame, which is kept as it
/// came, without a copy.
#[derive(Default)]
enum Gathered {
    #[default]
    Nothing,
    One(Bytes),
    Many(bytes::BytesMut),
}

impl Gathered {
    /// Adds a frame; `rest` says how much more the body says is to come, asked only of a
    /// body of many frames, which is gathered into one buffer of its whole length where it
    /// declared one, not a buffer grown by doubling (which holds up to twice the body, and
    /// touches each page twice as it grows). Room reserved and not yet written is not
    /// resident: a body that declares much and sends little holds only what it sent.
    fn push(&mut self, data: Bytes, rest: impl FnOnce() -> u64) {
        match self {
            Gathered::Nothing => *self = Gathered::One(data),
            Gathered::One(first) => {
                let rest = usize::try_from(rest()).unwrap_or(0);
                let mut buf = bytes::BytesMut::with_capacity(first.len() + data.len() + rest);
                buf.extend_from_slice(first);
                buf.extend_from_slice(&data);
                *self = Gathered::Many(buf);
            }
            Gathered::Many(buf) => buf.extend_from_slice(&data),
        }
    }

    fn len(&self) -> usize {
        match self {
            Gathered::Nothing => 0,
            Gathered::One(b) => b.len(),
            Gathered::Many(b) => b.len(),
        }
    }

    fn into_bytes(self) -> Bytes {
        match self {
            Gathered::Nothing => Bytes::new(),
            Gathered::One(b) => b,
            Gathered::Many(b) => b.freeze(),
        }
    }
}

/// Reads a body until its end, until more than `limit` bytes have come, or until `count`
/// has no room for a frame's bytes (which are then not kept), with what was read in `got`.
///
/// It stops at the length the body declared rather than polling once more for its end: on
/// hyper's HTTP/1 server that last poll is answered by the connection task that is running
/// it, a self-wake that costs a requeue per request (and, on a work-stealing scheduler, a
/// futex wake of another thread).
async fn gather<B>(
    body: &mut B,
    limit: usize,
    got: &mut Gathered,
    mut count: impl FnMut(usize) -> bool,
) -> Result<Gathering, B::Error>
where
    B: http_body::Body<Data = Bytes> + Unpin,
{
    while !body.is_end_stream() {
        let next = std::future::poll_fn(|cx| crate::self_wake::poll_frame(body, cx));
        let Some(frame) = next.await else {
            break;
        };
        if let Ok(data) = frame?.into_data() {
            if !count(data.len()) {
                return Ok(Gathering::NoRoom);
            }
            // What is still to come, as far as the limit: a declared length is a claim.
            got.push(data, || body.size_hint().lower().min(limit as u64));
            if got.len() > limit {
                return Ok(Gathering::OverLimit);
            }
        }
    }
    Ok(Gathering::Whole)
}

/// Reads a request body whole, refusing more than `limit` bytes.
pub async fn read_limited<B>(body: B, limit: usize) -> Result<Bytes, ReadError>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    read_counted(body, limit, |_| true).await
}

/// [`read_limited`], each frame's bytes counted by `count` as they come: with no room for
/// them, the read stops there ([`ReadError::NoRoom`]).
pub async fn read_counted<B>(
    mut body: B,
    limit: usize,
    count: impl FnMut(usize) -> bool,
) -> Result<Bytes, ReadError>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    // A declared length (Content-Length) over the limit is refused before reading.
    if body.size_hint().lower() > limit as u64 {
        return Err(ReadError::TooLarge);
    }
    let mut got = Gathered::default();
    match gather(&mut body, limit, &mut got, count).await {
        Ok(Gathering::Whole) => Ok(got.into_bytes()),
        Ok(Gathering::OverLimit) => Err(ReadError::TooLarge),
        Ok(Gathering::NoRoom) => Err(ReadError::NoRoom),
        Err(e) => Err(ReadError::Broken(e.to_string())),
    }
}

/// Reads an upstream body whole when it fits in `limit`; otherwise hands back a body that
/// replays what was read and streams the rest.
pub async fn collect_upstream<B>(
    body: B,
    limit: usize,
) -> Result<Collected<axum::body::Body>, B::Error>
where
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    Begun::unread(&body).collect(body, limit).await
}

/// The most of a body of unknown length read past its first frame before its share of the
/// room for answers is taken: enough for a small answer's last frames and its end, which
/// mostly come with the first. Each answer waiting for room holds this much uncounted at
/// most, beside its first frame (no larger than the connection's read buffer, which held it
/// already).
const BEFORE_SHARE: usize = 16 * 1024;

/// An upstream answer's body, read as far as its first frame.
///
/// A server may send an answer's head long before its body (it answers once the tool has
/// run). Counted from its head, such an answer would hold its share of the room for answers
/// ([`crate::policy::held`]) while the server works, and with no length declared that share is
/// as large as an answer may be: a few of them would keep every other client's answer
/// waiting. Counted from its first frame, the wait holds nothing. What came with that frame
/// is read too, so that a body of unknown length that has all come is counted for its
/// length, not for the largest an answer may be.
pub struct Begun {
    got: Gathered,
    ended: bool,
}

impl Begun {
    /// `body` with nothing read of it yet.
    fn unread(body: &impl http_body::Body) -> Begun {
        Begun {
            got: Gathered::default(),
            ended: body.is_end_stream(),
        }
    }

    /// Waits for the first frame of `body` (or its end), then takes what has come with it.
    /// The body stays where it is: only what was read of it moves on.
    pub async fn first_frame<B>(body: &mut B) -> Result<Begun, B::Error>
    where
        B: http_body::Body<Data = Bytes> + Unpin,
    {
        let mut begun = Begun::unread(body);
        while !begun.ended && begun.got.len() == 0 {
            let frame = body.frame().await;
            begun.take(body, frame)?;
        }
        // With a declared length, the share is known already.
        while !begun.ended && begun.got.len() < BEFORE_SHARE && body.size_hint().exact().is_none() {
            let Some(frame) = body.frame().now_or_never() else {
                break;
            };
            begun.take(body, frame)?;
        }
        Ok(begun)
    }

    fn take<B: http_body::Body<Data = Bytes>>(
        &mut self,
        body: &B,
        frame: Option<Result<http_body::Frame<Bytes>, B::Error>>,
    ) -> Result<(), B::Error> {
        let Some(frame) = frame else {
            self.ended = true;
            return Ok(());
        };
        if let Ok(data) = frame?.into_data() {
            (self.got).push(data, || body.size_hint().lower().min(BEFORE_SHARE as u64));
        }
        self.ended = body.is_end_stream();
        Ok(())
    }

    /// The whole length of `body`, begun so, where it is known: it has all come, or
    /// declared the rest.
    pub fn len(&self, body: &impl http_body::Body) -> Option<u64> {
        let rest = if self.ended {
            Some(0)
        } else {
            body.size_hint().exact()
        };
        rest.map(|rest| rest.saturating_add(self.got.len() as u64))
    }

    /// `body`, begun so, read whole when it fits in `limit`; otherwise a body that replays
    /// what was read and streams the rest.
    pub async fn collect<B>(
        self,
        mut body: B,
        limit: usize,
    ) -> Result<Collected<axum::body::Body>, B::Error>
    where
        B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let Begun { mut got, ended } = self;
        let whole = got.len() <= limit
            && (ended
                || matches!(
                    gather(&mut body, limit, &mut got, |_| true).await?,
                    Gathering::Whole
                ));
        if whole {
            return Ok(Collected::Whole(got.into_bytes()));
        }
        let head = got.into_bytes();
        let head = futures_util::stream::once(async move { Ok::<_, B::Error>(head) });
        use futures_util::StreamExt;
        Ok(Collected::TooLarge(axum::body::Body::from_stream(
            head.chain(body.into_data_stream()),
        )))
    }
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

    /// A body of unknown length: these frames, then its end or (`open`) nothing more.
    fn frames_then(
        parts: Vec<&'static str>,
        open: bool,
    ) -> http_body_util::StreamBody<
        impl futures_util::Stream<Item = Result<http_body::Frame<Bytes>, std::io::Error>> + Unpin,
    > {
        use futures_util::StreamExt;
        let frames = futures_util::stream::iter(parts)
            .map(|p| Ok(http_body::Frame::data(Bytes::from_static(p.as_bytes()))));
        let rest = futures_util::stream::pending().take(usize::from(open));
        http_body_util::StreamBody::new(frames.chain(rest))
    }

    #[tokio::test]
    async fn a_body_that_has_all_come_is_known_by_its_length() {
        let mut body = frames_then(vec!["ab", "cde"], false);
        let all_come = Begun::first_frame(&mut body).await.unwrap();
        assert_eq!(all_come.len(&body), Some(5));
        let Ok(Collected::Whole(bytes)) = all_come.collect(body, 5).await else {
            panic!("read whole");
        };
        assert_eq!(bytes, "abcde");

        let mut body = frames_then(vec!["ab", "cd"], true);
        let more_to_come = Begun::first_frame(&mut body).await.unwrap();
        assert_eq!(more_to_come.len(&body), None, "a length not yet known");

        let mut body = Declared(Some(Bytes::from_static(b"{}")), 2);
        let declared = Begun::first_frame(&mut body).await.unwrap();
        assert_eq!(declared.len(&body), Some(2));

        let mut body = frames_then(vec!["abc", "def"], false);
        let over = Begun::first_frame(&mut body).await.unwrap();
        let Ok(Collected::TooLarge(rest)) = over.collect(body, 5).await else {
            panic!("over the limit");
        };
        assert_eq!(rest.collect().await.unwrap().to_bytes(), "abcdef");
    }

    #[test]
    fn a_body_of_many_frames_is_gathered_in_one_buffer_of_its_declared_length() {
        let mut got = Gathered::default();
        let frame = Bytes::from(vec![b'x'; 100]);
        got.push(frame.clone(), || 800);
        got.push(frame.clone(), || 800);
        got.push(frame, || 700);
        let Gathered::Many(buf) = &got else {
            panic!("many frames");
        };
        assert_eq!((buf.len(), buf.capacity()), (300, 1_000));
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
