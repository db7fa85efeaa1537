//! What a server of 2026-07-28 announces (its lists changed, a resource updated), for a
//! handshake-era client of the reverse bridge (docs/contract.md §5, "Subscriptions bridged").
//! Such a client takes announcements on what its server sends on its own (its session's GET
//! stream, or its pipe); such a server sends them only on a `subscriptions/listen` stream.
//! toolgate holds one for the client's session, naming every list and the resources the
//! client subscribed to, opens it again each time those change, and hands on what it
//! carries as the client reads it (`pipeline::subscriptions::untagged`).
//!
//! An HTTP server's stream is the answer to toolgate's request ([`follow`]); one the server
//! ends, or that breaks, is opened again after a wait (1 s, doubled each time nothing came, up
//! to 30 s); one the server refuses (a 4xx, a server without subscriptions) is not: nothing it
//! announces can then reach the client. A stdio server's is a request written to the child
//! ([`follow_child`]), whose announcements come on its output with everything else it sends
//! on its own, read as the client reads them where that is read (`SessionChild::heard`).

use super::children::SessionChild;
use super::http_client::HttpUpstream;
use crate::config::Limits;
use crate::mcp;
use crate::net::client::{Media, UpstreamBody};
use crate::pipeline::bridge::Reverse;
use crate::pipeline::subscriptions;
use crate::transport::sse::{self, Events};
use crate::transport::upstream::session_stream::{DEFAULT_RETRY, Opened, longer};
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, Method};
use std::sync::Weak;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Follows what `up` announces to the client of `reverse`, whose requests go with `client`
/// (its credential), into `out`, until `out` is closed or toolgate shuts down (a client's GET
/// would otherwise hold the drain). A server that refuses the stream has nothing to hand on:
/// `out` is then held open, quiet, rather than ended, which a client would take for a
/// stream to open again at once. `ids` gives each of toolgate's requests its id.
pub(crate) async fn follow(
    up: &HttpUpstream,
    client: &HeaderMap,
    reverse: &Reverse,
    (ids, limits): (impl Fn() -> String, &Limits),
    out: mpsc::Sender<Bytes>,
) {
    let changes = reverse.changes();
    let (mut closing, gone) = (up.bridge.closing(), out.clone());
    let server = Server {
        up,
        headers: listen_headers(client),
        reverse,
        limits,
    };
    let followed = async {
        server.follow(ids, changes, out).await;
        gone.closed().await;
    };
    tokio::select! {
        () = followed => {}
        _ = closing.wait_for(|closing| *closing) => {}
    }
}

/// The server followed, and what its stream is opened with.
struct Server<'a> {
    up: &'a HttpUpstream,
    headers: HeaderMap,
    reverse: &'a Reverse,
    limits: &'a Limits,
}

impl Server<'_> {
    /// Opens the stream, again after it ends and at once with each of `changes`.
    async fn follow(
        &self,
        ids: impl Fn() -> String,
        mut changes: watch::Receiver<u64>,
        out: mpsc::Sender<Bytes>,
    ) {
        let mut wait = Duration::ZERO;
        loop {
            tokio::time::sleep(wait).await;
            changes.borrow_and_update();
            wait = match self.open(&ids()).await {
                Opened::Stream(body) => match relay(body, self.limits, &mut changes, &out).await {
                    Some(Relayed::Changed) => Duration::ZERO,
                    // A stream that carried something was working.
                    Some(Relayed::Ended { heard: true }) => DEFAULT_RETRY,
                    Some(Relayed::Ended { heard: false }) => longer(wait),
                    None => return,
                },
                Opened::Again => longer(wait),
                Opened::Never => return,
            };
        }
    }

    /// toolgate's `subscriptions/listen`, under `id`, naming what the client takes now.
    async fn open(&self, id: &str) -> Opened {
        let request = self.reverse.listen_request(id);
        let (headers, wait) = (self.headers.clone(), self.limits.into());
        match self
            .up
            .http
            .send(Method::POST, headers, request, wait)
            .await
        {
            Ok(r) if r.status().is_success() && r.body().media() == Media::EventStream => {
                Opened::Stream(r.into_body())
            }
            Ok(r) => {
                tracing::info!(status = %r.status(), "the upstream refused toolgate's subscriptions/listen for a handshake-era client; what it announces does not reach that client");
                Opened::Never
            }
            Err(e) => {
                tracing::debug!(error = %e, "toolgate's subscriptions/listen got no answer; asked again");
                Opened::Again
            }
        }
    }
}

/// How a stream's relaying ended.
enum Relayed {
    /// The client's subscriptions changed: the stream is to name them.
    Changed,
    /// The server ended it, or it broke; `heard`: it carried something first.
    Ended { heard: bool },
}

/// What `body`, the server's stream, carries, as the client reads it, into `out`, until it
/// ends or `changes` says the client subscribes to something else; `None` when nothing more
/// is to be followed.
async fn relay(
    body: UpstreamBody,
    limits: &Limits,
    changes: &mut watch::Receiver<u64>,
    out: &mpsc::Sender<Bytes>,
) -> Option<Relayed> {
    let mut events = Events::new(body, limits.max_sse_event_bytes);
    let mut heard = false;
    loop {
        let ev = tokio::select! {
            ev = events.next() => ev,
            changed = changes.changed() => return changed.ok().map(|()| Relayed::Changed),
        };
        let Ok(Some(ev)) = ev else {
            return Some(Relayed::Ended { heard });
        };
        let Some(data) = sse::data(&ev) else { continue };
        heard = true;
        if let Some(line) = subscriptions::untagged(data.as_bytes()) {
            out.send(line).await.ok()?;
        }
    }
}

/// The headers of toolgate's `subscriptions/listen` in the client's name: its credential,
/// no session, the 2026-07-28 ones.
fn listen_headers(client: &HeaderMap) -> HeaderMap {
    let mut headers = super::http_bridge::own_headers(client);
    headers.remove(mcp::SESSION_ID);
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    let version = HeaderValue::from_static(mcp::MODERN_VERSION);
    headers.insert(mcp::PROTOCOL_VERSION, version);
    let method = HeaderValue::from_static(subscriptions::LISTEN);
    headers.insert(mcp::METHOD_HEADER, method);
    headers
}

/// [`follow`] for the child of `sc`, a session toolgate keeps for a handshake-era client
/// before a stdio server of 2026-07-28 only: toolgate's `subscriptions/listen` is written to
/// the child, and written again (the one before cancelled) each time the client's
/// subscriptions change, until the session or the child ends. `ids` gives each its id.
pub(crate) async fn follow_child(sc: Weak<SessionChild>, ids: impl Fn() -> String) {
    let Some(mut changes) = sc.upgrade().and_then(|sc| Some(sc.reverse()?.changes())) else {
        return;
    };
    let mut before: Option<String> = None;
    loop {
        changes.borrow_and_update();
        let Some(session) = sc.upgrade() else { return };
        let Some(reverse) = session.reverse() else {
            return;
        };
        let id = ids();
        let raw = serde_json::to_string(&id).expect("a string serializes");
        let Ok(mut owed) = session.child.start(reverse.listen_request(&id), &raw) else {
            return;
        };
        if let Some(old) = before.replace(raw) {
            let cancelled = format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{{"requestId":{old}}}}}"#
            );
            let _ = session.child.send(Bytes::from(cancelled));
        }
        drop(session);
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            // Its answer ends the stream (or the child): it is written again after a while.
            answered = owed.next(UNANSWERED) => match answered {
                Ok(_) => tokio::time::sleep(DEFAULT_RETRY).await,
                Err(_) => return,
            },
        }
    }
}

/// How long a stream written to a child may go without its answer: for as long as it lasts.
const UNANSWERED: Duration = Duration::from_secs(365 * 24 * 3600);
