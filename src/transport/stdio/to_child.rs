//! `toolgate stdio -- CMD`: the stdio front in front of a server toolgate starts as its child.
//!
//! A message reaches the child as it reaches any stdio server's child, through
//! `exchange::to_children::ChildWay`, here under the client's own ids; what it answers in
//! HTTP form is written as lines (`lines`). Messages are written to the child in the client's
//! order; each request waits for its own answer, so one slow call holds up nothing else. What
//! the child sends on its own goes to the client as it comes. The child's era is asked on
//! the first 2026-07-28 request, and a handshake-era client is bridged to a child that
//! refuses `initialize` and answers `server/discover`.

use super::{Forwarded, ToClient, Upstream, lines};
use crate::catalog::ScopeKey;
use crate::gateway::{Gateway, Target};
use crate::jsonrpc::Message;
use crate::locks::MutexExt;
use crate::mcp::Era;
use crate::metrics;
use crate::pipeline::bridge::Declared;
use crate::pipeline::step::Bridging;
use crate::transport::exchange::to_children::{ChildReply, ChildWay};
use crate::transport::exchange::{Note, Said, StreamOutcome};
use crate::transport::upstream::child::{
    ChildLister, ChildSource, FromChild, Handler, OwnRequestFailed, ServerEra,
};
use crate::transport::upstream::children::SessionChild;
use crate::transport::upstream::subscribers::Subscribers;
use serde_json::value::RawValue;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Runs until the client or the server goes away; returns the process exit status. The
/// child is the first target's: its command, or a session with its HTTP+SSE server.
pub async fn run(gw: Arc<Gateway>) -> i32 {
    let target = gw.targets[0].clone();
    let source = match ChildSource::of(&target) {
        Ok(Some(source)) => source,
        // A Streamable HTTP server is reached through `over_http`, never as a child.
        Ok(None) => {
            tracing::error!("the server is a Streamable HTTP one: no child stands for it");
            return 1;
        }
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    let (to, writer) = ToClient::open(gw.clone());
    let key = gw.scope(&target, Some(b"stdio"), []);
    let (exited, gone) = tokio::sync::oneshot::channel();
    let subscribers = Arc::new(Subscribers::default());
    let session = Arc::new(std::sync::OnceLock::new());
    let handler = Heard {
        to: to.clone(),
        key,
        subscribers: subscribers.clone(),
        session: session.clone(),
        exited: std::sync::Mutex::new(Some(exited)),
    };
    let process = match source.start((&gw, &target, None), handler) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    let pid = process.pid();
    tracing::info!(server = %process.program(), pid, "{}", process.started());
    let up = Arc::new(Child {
        timeout: target.limits.upstream_timeout,
        gw,
        target,
        key,
        sc: SessionChild::of_pipe(process, subscribers),
        settled: tokio::sync::OnceCell::new(),
    });
    // Set right after the child starts, as the pool's children are: it can speak before.
    let _ = session.set(Arc::downgrade(&up.sc));
    super::serve(up, to, writer, Some(gone)).await
}

/// What the child sends on its own, on its way to the client, read no faster than the
/// client reads; and the child's end.
struct Heard {
    to: ToClient,
    key: ScopeKey,
    /// A 2026-07-28 client's `subscriptions/listen` streams, bridged: what they take goes
    /// on them, not also to the pipe as it came.
    subscribers: Arc<Subscribers>,
    /// The child's session: before a server of 2026-07-28 only, what toolgate follows of it
    /// for a handshake-era client is read as that client reads what its server sends on its
    /// own (`upstream::announced`).
    session: Arc<std::sync::OnceLock<std::sync::Weak<SessionChild>>>,
    exited: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<String>>>,
}

impl Handler for Heard {
    fn handle(&self, ev: FromChild) {
        match ev {
            FromChild::Message(line) => {
                let line = match self.session.get().and_then(std::sync::Weak::upgrade) {
                    Some(sc) => sc.heard(line),
                    None => Some(line),
                };
                let Some(line) = line else { return };
                (self.to).unsolicited(self.key, line, Some(&self.subscribers))
            }
            // Logged by the front, which knows whether the client had asked for it.
            FromChild::Exited(how) => {
                if let Some(tx) = self.exited.locked().take() {
                    let _ = tx.send(how);
                }
            }
        }
    }

    fn ready(&self) -> impl Future<Output = ()> + Send {
        self.to.paced()
    }
}

/// The child behind the front.
pub(crate) struct Child {
    gw: Arc<Gateway>,
    target: Arc<Target>,
    key: ScopeKey,
    sc: Arc<SessionChild>,
    timeout: Duration,
    /// Set once what it speaks to a 2026-07-28 client is known, asked on the first such
    /// request (and again after a failure); read without a lock after.
    settled: tokio::sync::OnceCell<()>,
}

/// How one message reaches the child: its way, and what sending it reads of the message.
pub(crate) struct PipeWay {
    way: ChildWay,
    method: &'static str,
    /// The request a `notifications/cancelled` names.
    cancelled: Option<Box<RawValue>>,
}

impl Child {
    /// Asks the child's era when a 2026-07-28 client's first request (`m`) needs it; the
    /// handshake a child that speaks only that is bridged over carries what `m` says of the
    /// client.
    async fn settle(&self, m: &Message<'_>) {
        let asked = self.settled.get_or_try_init(|| async {
            let client = Declared::of(m).initialize_params();
            let era = (self.sc.child)
                .settle_era(|| self.gw.next_id(), Some(&client), self.timeout)
                .await?;
            if let ServerEra::Bridged(init) = era {
                self.sc.bridge(init);
            }
            Ok::<_, OwnRequestFailed>(())
        });
        // Its own answers will tell the client what is wrong; asked again next time.
        if let Err(why) = asked.await {
            tracing::warn!(error = %why, "could not learn the tool server's era; 2026-07-28 requests go to it as they are");
        }
    }
}

impl Upstream for Child {
    type Way = PipeWay;
    type Lister<'a> = ChildLister<'a>;

    const IN_ORDER: bool = true;

    fn target(&self) -> &Arc<Target> {
        &self.target
    }

    fn key(&self, way: &PipeWay) -> ScopeKey {
        way.way.key()
    }

    async fn way(&self, m: &Message<'_>, era: Era) -> PipeWay {
        if era == Era::Modern && m.is_request() {
            self.settle(m).await;
        }
        let method = metrics::method_label(m.method());
        let initialize = m.is_request() && method == "initialize";
        let sc = self.sc.clone();
        PipeWay {
            way: ChildWay::pipe(sc, era, self.key, self.timeout, initialize),
            method,
            cancelled: match method {
                "notifications/cancelled" => m.cancelled_id().map(ToOwned::to_owned),
                _ => None,
            },
        }
    }

    fn bridging(way: &PipeWay) -> Bridging<'_> {
        way.way.bridging()
    }

    fn lister<'a>(self: &'a Arc<Self>, way: &'a PipeWay) -> ChildLister<'a> {
        way.way.lister()
    }

    fn exchange(
        self: Arc<Self>,
        way: PipeWay,
        sent: Forwarded,
    ) -> impl Future<Output = ()> + Send + 'static {
        let Forwarded {
            body,
            pending,
            handshake,
            hop_parent,
            to,
        } = sent;
        let said = Said {
            id: pending.id.as_deref(),
            method: way.method,
            params: handshake.as_ref().and_then(|h| h.params.as_deref()),
            cancelled: way.cancelled.as_deref(),
        };
        let mut note = Note {
            method: way.method,
            hop_parent,
            ..Note::default()
        };
        // Written now, in the client's order; only the wait is left to the future.
        let written = way.way.write(&self.gw, body, &pending, said, &mut note);
        async move {
            if pending.id.is_none() {
                // A notification or a client's answer: nothing comes back to write.
                return;
            }
            let mut resp = match written.answer(&self.gw, &pending, &mut note).await {
                // The answer, read by the rules already.
                ChildReply::One(_, body) => return to.write_answer(&pending, body, note.outcome),
                ChildReply::Response(resp) => resp,
            };
            // What toolgate answered itself (a refusal, a failure) is traced as such.
            if note.outcome != "forwarded" {
                let outcome = StreamOutcome::default();
                outcome.set(note.outcome);
                resp.extensions_mut().insert(outcome);
            }
            // Boxed: the rare path (a stream, toolgate's own answer) of every request.
            Box::pin(lines::write(&to, &pending, resp, |_| {})).await;
        }
    }

    async fn end(&self, grace: Duration) -> String {
        self.sc.child.shutdown(grace).await
    }

    fn kill(&self) {
        self.sc.child.kill_group();
    }
}
