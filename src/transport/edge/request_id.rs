//! One id per request, through every log: the client's `X-Request-Id` when it is a sane token
//! (1 to 128 visible ASCII characters), else a fresh one. It goes upstream with the request and
//! back to the client on the answer, so the client, toolgate's access log and the upstream's
//! logs name the request alike. One header value serves the request, the note and the answer.
//!
//! Caveat: an answer that already carries `X-Request-Id` (an upstream's own) is given
//! toolgate's, so the client always sees the id it can find in toolgate's log.

use super::request::{Inbound, Outbound};
use crate::gateway::IdText;
use bytes::Bytes;
use http::header::Entry;
use http::{HeaderMap, HeaderName, HeaderValue};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tower_layer::Layer;
use tower_service::Service;

pub(crate) const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The client's id when it is a sane token, else `mint()`, now in `headers` either way. One
/// entry, found once, is read and, when needed, written.
fn settle(headers: &mut HeaderMap, mint: impl FnOnce() -> IdText) -> HeaderValue {
    let sane = |v: &HeaderValue| {
        (1..=128).contains(&v.len()) && v.as_bytes().iter().all(|b| b.is_ascii_graphic())
    };
    let minted = || {
        HeaderValue::from_maybe_shared(Bytes::from_owner(mint()))
            .expect("minted ids are visible ASCII")
    };
    match headers.entry(REQUEST_ID) {
        Entry::Occupied(sent) if sane(sent.get()) => sent.get().clone(),
        Entry::Occupied(mut odd) => {
            let id = minted();
            odd.insert(id.clone());
            id
        }
        Entry::Vacant(none) => none.insert(minted()).clone(),
    }
}

/// Applies [`RequestId`] to a service.
#[derive(Clone, Copy, Default)]
pub(crate) struct RequestIdLayer;

impl<S> Layer<S> for RequestIdLayer {
    type Service = RequestId<S>;

    fn layer(&self, inner: S) -> RequestId<S> {
        RequestId { inner }
    }
}

/// Gives each request its id (in its headers, for the hops within, and in its note, for the
/// log) and each answer the same.
#[derive(Clone)]
pub(crate) struct RequestId<S> {
    inner: S,
}

impl<S, B> Service<Inbound<B>> for RequestId<S>
where
    S: Service<Inbound<B>, Response = Outbound, Error = Infallible>,
    S::Future: Unpin,
{
    type Response = Outbound;
    type Error = Infallible;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut inbound: Inbound<B>) -> Self::Future {
        let gw = &inbound.gw;
        let id = settle(&mut inbound.head.headers, || gw.next_id_text());
        inbound.note.request_id = Some(id);
        ResponseFuture(self.inner.call(inbound))
    }
}

/// The inner service's answer, given the request's id.
pub(crate) struct ResponseFuture<F>(F);

impl<F> Future for ResponseFuture<F>
where
    F: Future<Output = Result<Outbound, Infallible>> + Unpin,
{
    type Output = Result<Outbound, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Ok(mut out) = std::task::ready!(Pin::new(&mut self.0).poll(cx));
        if let Some(id) = &out.note.request_id {
            out.resp.headers_mut().insert(REQUEST_ID, id.clone());
        }
        Poll::Ready(Ok(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::Gateway;
    use crate::transport::edge::request::test_config;
    use crate::transport::exchange::Note;
    use axum::response::Response;
    use tower::ServiceExt;

    /// The id the inner service saw in the request's headers, and the one on the answer.
    async fn ids(sent: Option<&str>) -> (String, String) {
        let inner = tower::service_fn(|inbound: Inbound<()>| {
            let seen = inbound.head.headers[&REQUEST_ID].to_str().unwrap();
            let resp = Response::new(axum::body::Body::from(seen.to_owned()));
            std::future::ready(Ok::<_, Infallible>(inbound.answer(resp)))
        });
        let mut req = http::Request::builder();
        if let Some(id) = sent {
            req = req.header(REQUEST_ID, id);
        }
        let gw = Gateway::new(test_config()).unwrap();
        let inbound = Inbound::new(req.body(()).unwrap(), gw, Box::new(Note::new()));
        let out = RequestIdLayer.layer(inner).oneshot(inbound).await.unwrap();
        let answered = out.resp.headers()[&REQUEST_ID].to_str().unwrap().to_owned();
        assert_eq!(out.note.request_id.unwrap().to_str().unwrap(), answered);
        let body = axum::body::to_bytes(out.resp.into_body(), 1024)
            .await
            .unwrap();
        (String::from_utf8(body.to_vec()).unwrap(), answered)
    }

    #[tokio::test]
    async fn a_sane_client_id_is_kept_both_ways() {
        let (seen, answered) = ids(Some("trace-42")).await;
        assert_eq!((seen.as_str(), answered.as_str()), ("trace-42", "trace-42"));
    }

    #[tokio::test]
    async fn a_missing_or_odd_id_is_replaced_by_one_toolgate_mints() {
        let too_long = "x".repeat(129);
        for sent in [None, Some("has space"), Some(too_long.as_str())] {
            let (seen, answered) = ids(sent).await;
            assert_eq!(seen, answered, "{sent:?}");
            assert_ne!(Some(seen.as_str()), sent, "{sent:?}");
            assert!(!seen.is_empty());
        }
    }
}
