//! A `subscriptions/listen` stream served from a session toolgate holds with a server of the
//! handshake era, in HTTP form, for every kind of server (docs/contract.md §5,
//! "Subscriptions bridged"): the stream is opened among the session's
//! (`upstream::subscribers`), its resources subscribed to, then it is acknowledged and
//! carries the session's announcements as they come. It ends when its client leaves, when
//! its client takes nothing for too long, or when the session ends; nothing is replayed, and
//! its client opens it again.
//!
//! The other way, what a server of 2026-07-28 announces reaches a handshake-era client of
//! the reverse bridge on its session's GET stream ([`announced()`]).

use super::Note;
use super::reply;
use crate::config::Limits;
use crate::gateway::Gateway;
use crate::jsonrpc;
use crate::pipeline::Pending;
use crate::pipeline::answer::Answer;
use crate::pipeline::bridge::Reverse;
use crate::pipeline::subscriptions::Subscription;
use crate::transport::sse;
use crate::transport::upstream::announced;
use crate::transport::upstream::http_client::HttpUpstream;
use crate::transport::upstream::own::OwnRequests;
use crate::transport::upstream::subscribers::{self, Release, Subscribed, Subscribers};
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::HeaderMap;
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use std::sync::Arc;
use tokio::sync::mpsc;

/// Serves `subscription`, the request `pending`, from the session whose streams are
/// `subscribers`, asking `server` (in that session) to subscribe to its resources; `release`
/// tells the server when no stream holds some of them any more.
pub(crate) async fn serve<S: OwnRequests>(
    gw: &Gateway,
    (server, subscribers): (&S, &Arc<Subscribers>),
    (subscription, pending): (Subscription, &Pending),
    release: Release,
    note: &mut Note,
) -> Response {
    let uris = subscription.filter.uris.clone();
    let (subscribed, rx) = match subscribers.open(subscription, release) {
        Ok(opened) => opened,
        Err(full) => {
            note.outcome = "answered";
            let (id, code) = (pending.id.as_deref(), jsonrpc::INTERNAL_ERROR);
            let a = Answer::error(id, code, &full.to_string(), None);
            return reply::answer(pending.era, a);
        }
    };
    let refused = subscribers::subscribe(server, &uris, || gw.next_id()).await;
    let ack = subscribed.acknowledgment(&refused);
    note.outcome = "answered";
    respond(ack, subscribed, rx)
}

/// A handshake-era client's GET stream in the session toolgate keeps for it before an HTTP
/// server of 2026-07-28 (`reverse`): what the server announces, followed with a
/// `subscriptions/listen` stream of toolgate's (`upstream::announced`) in the client's name
/// (`client`, its headers), for as long as the client reads it.
pub(crate) fn announced(
    (gw, up, limits): (&Arc<Gateway>, &Arc<HttpUpstream>, &Limits),
    reverse: Arc<Reverse>,
    client: &HeaderMap,
) -> Response {
    let (tx, rx) = mpsc::channel(FOLLOWED);
    let (up, gw, limits, client) = (up.clone(), gw.clone(), limits.clone(), client.clone());
    tokio::spawn(async move {
        let ids = || gw.next_id();
        announced::follow(&up, &client, &reverse, (ids, &limits), tx).await;
    });
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        let m = rx.recv().await?;
        Some((Ok::<_, std::convert::Infallible>(sse::event(&m)), rx))
    });
    event_stream(Body::from_stream(events))
}

/// What the server's stream is read ahead of a client that reads slowly: past it, the server
/// is held back (its stream read no further), as it would be by that client.
const FOLLOWED: usize = 64;

fn event_stream(body: Body) -> Response {
    Response::builder()
        .header(CONTENT_TYPE, "text/event-stream")
        .header(CACHE_CONTROL, "no-cache")
        .body(body)
        .expect("valid response")
}

/// The stream: its acknowledgment, then what the session announces that it holds.
fn respond(ack: Bytes, subscribed: Subscribed, rx: mpsc::Receiver<Bytes>) -> Response {
    let first = futures_util::stream::once(std::future::ready(Ok(sse::event(&ack))));
    let rest = futures_util::stream::unfold((rx, subscribed), |(mut rx, s)| async move {
        let m = rx.recv().await?;
        Some((Ok::<_, std::convert::Infallible>(sse::event(&m)), (rx, s)))
    });
    use futures_util::StreamExt;
    event_stream(Body::from_stream(first.chain(rest)))
}
