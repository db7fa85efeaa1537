//! An answer passed on as it comes, unread. Its head has gone to the client by the time its
//! body can fail, so a body that breaks off (the server's connection lost, its wait for the
//! next bytes over) can only break the client's connection too; what toolgate adds is saying
//! so in its log, as it says of an answer it reads whole that breaks off.

use crate::error::UpstreamError;
use crate::gateway::Target;
use bytes::Bytes;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

/// `body`, a server's answer to a request passed on unread: said once it breaks off, unless
/// it goes to the stdio front, which answers a break itself and says it then
/// (`answers::Reading::to_pipe`).
pub(super) fn passed_on<B>(body: B, target: Arc<Target>, to_pipe: bool) -> axum::body::Body
where
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    match to_pipe {
        false => axum::body::Body::new(Relayed { body, target }),
        true => axum::body::Body::new(body),
    }
}

/// A server's answer to a request, passed on unread: said once it breaks off.
struct Relayed<B> {
    body: B,
    target: Arc<Target>,
}

impl<B> http_body::Body for Relayed<B>
where
    B: http_body::Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, B::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(Some(Err(e))) = &polled {
            let why = UpstreamError::unanswered_stream(Some(e.to_string()));
            (self.target.failures).failed(&self.target.name, why.kind(), &why);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}
