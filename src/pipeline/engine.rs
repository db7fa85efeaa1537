//! The one driver of a client's message through the rules, for every front (the HTTP edge,
//! the stdio pipe, the in-process layer) and every kind of server behind it.
//!
//! A front reads and parses its transport's bytes, asks [`admit`], settles the message's
//! [`Way`] to its server, and lends both to [`handle`]: the guard and the era bridge decide it
//! (`step::decide`, listing the server's tools the same way the message goes), and what is
//! forwarded is sent through the way, which the front hands to [`Forward::send`]; that also
//! times the server's answer for the latency histogram. The front turns the [`Handled`] it
//! gets back into its transport's terms (an HTTP response, a line on stdout) and records it
//! in its own log and trace. What comes back from the server is read by `pipeline::settle`,
//! and a request that gets no usable answer by `pipeline::unanswered`, whichever way it went.

use super::Pending;
use super::answer::Answer;
use super::guard::{self, Lister};
use super::step::{self, Bridging, Sender, Step};
use crate::catalog::ScopeKey;
use crate::gateway::{Gateway, Target};
use crate::jsonrpc::Message;
use crate::mcp::Era;
use crate::policy::clients::Client;
use bytes::Bytes;
use futures_util::FutureExt;
use std::borrow::Borrow;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

/// How one message reaches its server, settled by the front before the message is decided
/// (which session, which child, which era bridge). It is also the [`Lister`] of toolgate's
/// own `tools/list` for the guard, which goes the same way the message would; its `Relay` is
/// a refusal of that listing the client must see as it came (over HTTP: a 401, a lost
/// session), `Infallible` where the transport cannot hand one over.
pub(crate) trait Way: Lister + Sync + Sized {
    /// What sending gives the front: the server's response to pass on, or nothing when the
    /// way writes the answer to its client itself.
    type Reply;

    /// The scope the server's listings are kept under.
    fn key(&self) -> ScopeKey;
    fn bridging(&self) -> Bridging<'_>;
    /// Sends `body`, whose answer is read against `pending`. Whatever must reach the server
    /// in the client's order (a child's stdin) is written before this returns; the future
    /// waits for the reply.
    fn send(self, body: Bytes, pending: Pending) -> impl Future<Output = Self::Reply> + Send;
}

/// Who sent a message, in which era, to which target.
pub(crate) struct Origin<'a> {
    pub(crate) target: &'a Arc<Target>,
    pub(crate) era: Era,
    pub(crate) client: Option<Client>,
}

/// What the front does with a message once it is decided.
pub(crate) enum Handled<W: Way> {
    /// toolgate answers it; the answer's error code, if any, decides a 2026-07-28 status.
    Answered(Answer),
    /// The server refused toolgate's listing for a reason the client must see as it came.
    Relayed(<W as Lister>::Relay),
    /// Nothing goes to the server and nothing comes back ([`Step::Consumed`]: the era
    /// bridge took it, or a notification no server could read).
    Consumed,
    /// It goes to the server, the way it was decided for: [`Forward::send`].
    Forward(Forward),
}

/// A message the rules forward, not yet sent.
///
/// Without its way, which the front keeps and hands to [`Forward::send`]: the decision
/// moves from the guard's future to the front's and on to the send, and a way carried
/// along would be copied at each step (docs/performance.md).
pub(crate) struct Forward {
    body: Bytes,
    pending: Pending,
}

impl Forward {
    /// The request its answer is read against (`id` is `None` for a notification).
    pub(crate) fn pending(&self) -> &Pending {
        &self.pending
    }

    /// Sends it now through `way`, the one it was decided for; the future ends with the
    /// way's reply, and records how long the server took in the latency histogram. `gw`
    /// and `target` are borrowed by a front that awaits at once, owned by one that waits
    /// on a task of its own.
    pub(crate) fn send<W, G, T>(
        self,
        way: W,
        gw: G,
        target: T,
    ) -> impl Future<Output = W::Reply> + Send + use<W, G, T>
    where
        W: Way,
        G: Borrow<Gateway> + Send,
        T: Borrow<Target> + Send,
    {
        let sent = Instant::now();
        let reply = way.send(self.body, self.pending);
        // A map, not an async block awaiting it: a block would hold the way's future twice
        // (as it captured it, and as it awaits it), and every request would copy both.
        reply.map(move |reply| {
            let (gw, target) = (gw.borrow(), target.borrow());
            (target.series).latency(&gw.metrics, sent.elapsed());
            reply
        })
    }
}

/// The checks a message meets before a way to its server is settled (which may start a
/// child): a `tools/call` sent as a notification goes no further, and `Err` says why.
pub(crate) fn admit(gw: &Gateway, target: &Target, m: &Message<'_>) -> Result<(), &'static str> {
    match guard::refuse_call_notification(gw, target, m) {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

/// Decides `m` (parsed from `bytes`) from `origin`, going `way`: the guard for a
/// `tools/call`, then the era bridge. A block, not an `async fn`: that would keep its
/// arguments twice (as they were given, and as the body holds them).
pub(crate) fn handle<'a, W: Way + 'a>(
    gw: &'a Gateway,
    origin: Origin<'a>,
    m: &'a mut Message<'_>,
    bytes: &'a Bytes,
    way: &'a W,
) -> impl Future<Output = Handled<W>> + 'a {
    let sender = Sender {
        target: origin.target,
        key: way.key(),
        era: origin.era,
        client: origin.client,
    };
    async move {
        let step = step::decide(gw, sender, m, bytes, way.bridging(), way).await;
        match step {
            Step::Forward { body, pending } => Handled::Forward(Forward { body, pending }),
            Step::Answer(a) => Handled::Answered(a),
            Step::Relay(r) => Handled::Relayed(r),
            Step::Consumed => Handled::Consumed,
        }
    }
}
