//! `toolgate stdio -- CMD`: the stdio front in front of a server toolgate starts as its child.
//!
//! Messages are written to the child in the client's order; each request waits for its own
//! answer ([`ChildProcess::start`]), so one slow call holds up nothing else. What the child
//! sends on its own goes to the client as it comes. The child's era is asked on the first
//! 2026-07-28 request (`ChildProcess::settle_era`), and a handshake-era client is bridged to
//! a child that refuses `initialize` and answers `server/discover`.

use super::{Forwarded, Handshake, Reversed, ToClient, Upstream, lines};
use crate::catalog::ScopeKey;
use crate::error::UpstreamError;
use crate::gateway::{Gateway, Target};
use crate::jsonrpc;
use crate::jsonrpc::Message;
use crate::locks::MutexExt;
use crate::mcp::Era;
use crate::pipeline::Pending;
use crate::pipeline::asked;
use crate::pipeline::bridge::{Declared, Reverse};
use crate::pipeline::step::Bridging;
use crate::transport::exchange::asking::{self, RetryServer, ReverseRounds};
use crate::transport::upstream::child::{ChildLister, ChildProcess, FromChild, ServerEra};
use crate::transport::upstream::child::{Owed, Waiting};
use crate::transport::upstream::child_questions::Answered;
use crate::transport::upstream::rounds::Unresumed;
use bytes::Bytes;
use serde_json::value::RawValue;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Runs until the client or the server goes away; returns the process exit status.
pub async fn run(gw: Arc<Gateway>, command: &[String]) -> i32 {
    let target = gw.targets[0].clone();
    let (to, writer) = ToClient::open(gw.clone());
    let key = gw.scope(&target, Some(b"stdio"), None);
    let (exited, gone) = tokio::sync::oneshot::channel();
    let handler = {
        let to = to.clone();
        let exited = std::sync::Mutex::new(Some(exited));
        move |ev| match ev {
            FromChild::Message(line) => to.unsolicited(key, line),
            // Logged by the front, which knows whether the client had asked for it.
            FromChild::Exited(how) => {
                if let Some(tx) = exited.locked().take() {
                    let _ = tx.send(how);
                }
            }
        }
    };
    let process = match ChildProcess::spawn(command, gw.config.limits.max_response_bytes, handler) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    tracing::info!(server = %process.command(), "started the tool server");
    let up = Arc::new(Child {
        timeout: gw.config.limits.upstream_timeout,
        gw,
        target,
        key,
        process,
        era: tokio::sync::Mutex::new(None),
        reverse: Reversed::default(),
    });
    super::serve(up, to, writer, Some(gone)).await
}

/// The child behind the front.
pub(crate) struct Child {
    gw: Arc<Gateway>,
    target: Arc<Target>,
    key: ScopeKey,
    process: Arc<ChildProcess>,
    timeout: Duration,
    /// What it speaks to a 2026-07-28 client, asked on the first such request.
    era: tokio::sync::Mutex<Option<ServerEra>>,
    reverse: Reversed,
}

/// How one message reaches the child.
pub(crate) struct PipeWay {
    /// The child's `initialize` result, for a 2026-07-28 request bridged to its handshake.
    handshake: Option<Box<RawValue>>,
    reverse: Option<Arc<Reverse>>,
    /// The server may ask its client something before it answers (a call, a prompt, a read).
    may_ask: bool,
}

/// A request written to the child, and what its answer is waited for as.
enum Written {
    /// A notification, or a client's answer: nothing comes back.
    Told,
    Failed(UpstreamError),
    Plain(Owed),
    /// A bridged 2026-07-28 call the server may ask something of first, and the id its
    /// answer comes under.
    Bridged(Waiting, Box<RawValue>),
    /// A retry of a round that cannot be taken: why.
    Unresumed(String),
}

impl Child {
    /// The child's `initialize` result when a 2026-07-28 client is bridged to it. The
    /// handshake carries what the client's first such request (`m`) says of it.
    async fn bridged(&self, m: &Message<'_>) -> Option<Box<RawValue>> {
        let mut era = self.era.lock().await;
        if era.is_none() {
            let client = Declared::of(m).initialize_params();
            *era = match self
                .process
                .settle_era(|| self.gw.next_id(), Some(&client), self.timeout)
                .await
            {
                Ok(e) => Some(e),
                Err(why) => {
                    // Its own answers will tell the client what is wrong; asked again later.
                    tracing::warn!(error = %why, "could not learn the tool server's era; 2026-07-28 requests go to it as they are");
                    None
                }
            };
        }
        match era.as_ref() {
            Some(ServerEra::Bridged(init)) => Some(init.clone()),
            _ => None,
        }
    }
}

impl Upstream for Child {
    type Way = PipeWay;
    type Lister<'a> = ChildLister<'a>;

    const IN_ORDER: bool = true;
    const SERVER: &'static str = "stdio";

    fn target(&self) -> &Arc<Target> {
        &self.target
    }

    fn key(&self, _way: &PipeWay) -> ScopeKey {
        self.key
    }

    async fn way(&self, m: &Message<'_>, era: Era) -> PipeWay {
        let handshake = match era == Era::Modern && m.is_request() {
            true => self.bridged(m).await,
            false => None,
        };
        let reverse = self.reverse.for_era(era);
        let may_ask = m.method().is_some_and(asked::may_ask);
        PipeWay {
            handshake,
            reverse,
            may_ask,
        }
    }

    fn bridging(way: &PipeWay) -> Bridging<'_> {
        Bridging::of(way.handshake.as_deref(), way.reverse.as_deref())
    }

    fn lister<'a>(self: &'a Arc<Self>, way: &'a PipeWay, _era: Era) -> ChildLister<'a> {
        ChildLister {
            child: &self.process,
            timeout: self.timeout,
            bridging: Self::bridging(way),
        }
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
            to,
        } = sent;
        // A handshake-era client's request to a server of 2026-07-28, which may ask for input.
        let rounds = (way.reverse.clone())
            .filter(|_| way.may_ask)
            .map(|r| (body.clone(), r));
        // Written now, in the client's order; only the wait is left to the future.
        let written = self.write(&way, body, pending.id.as_deref());
        async move {
            let owed = match written {
                Written::Told => return,
                Written::Failed(e) => return to.failed(&pending, &e),
                Written::Unresumed(why) => {
                    let id = pending.id.as_deref();
                    let refusal = jsonrpc::error_response(id, jsonrpc::INVALID_PARAMS, &why, None);
                    return to.write_answer(&pending, refusal, "answered");
                }
                Written::Bridged(waiting, answers_as) => {
                    return self
                        .answer_bridged(waiting, &answers_as, &pending, &to)
                        .await;
                }
                Written::Plain(owed) => owed,
            };
            let answer = owed.answer(self.timeout).await;
            match answer {
                Ok(answer) => {
                    if let Some(h) = handshake
                        && let Some(ours) = self.reverse_if_refused(&pending, h, &answer).await
                    {
                        return to.write(ours);
                    }
                    if let Some((request, reverse)) = rounds
                        && asked::input_required(&answer).is_some()
                    {
                        // Its rounds, as an HTTP client's are asked: the questions, then
                        // the last answer, each a line.
                        let server = RetryServer::Child(self.process.retrying(self.timeout));
                        let rounds = ReverseRounds {
                            request,
                            reverse,
                            server,
                        };
                        let resp = asking::answer(&self.gw, pending.clone(), answer, rounds);
                        return lines::write(&to, &pending, resp, |_| {}).await;
                    }
                    to.answer(&pending, answer);
                }
                Err(e) => to.failed(&pending, &e),
            }
        }
    }

    async fn end(&self, grace: Duration) -> String {
        self.process.shutdown(grace).await
    }

    fn kill(&self) {
        self.process.kill_group();
    }
}

impl Child {
    /// Writes a message to the child now; a round's retry writes the client's answer to the
    /// server's question instead.
    fn write(&self, way: &PipeWay, body: Bytes, id: Option<&RawValue>) -> Written {
        let Some(id) = id else {
            return match self.process.send(body) {
                Ok(()) => Written::Told,
                Err(e) => Written::Failed(e),
            };
        };
        if way.handshake.is_none() || !way.may_ask {
            return match self.process.start(body, id.get()) {
                Ok(owed) => Written::Plain(owed),
                Err(e) => Written::Failed(e),
            };
        }
        match self.process.bridged_call(body, id, self.key) {
            Ok((waiting, answers_as)) => Written::Bridged(waiting, answers_as),
            Err(Unresumed::Refused(why)) => Written::Unresumed(why),
            Err(Unresumed::Unavailable(e)) => Written::Failed(e),
        }
    }

    /// A bridged call's answer, or the round the server's question makes of it.
    async fn answer_bridged(
        &self,
        waiting: Waiting,
        answers_as: &RawValue,
        pending: &Pending,
        to: &ToClient,
    ) {
        let client_id = pending.id.as_deref().expect("a request");
        let ids = (answers_as, client_id);
        match self
            .process
            .bridged_answer(waiting, ids, self.key, self.timeout)
            .await
        {
            Ok(Answered::Server(answer)) => {
                to.answer(pending, answer);
            }
            Ok(Answered::Round(round)) => to.write_answer(pending, round, "forwarded"),
            Err(e) => to.failed(pending, &e),
        }
    }

    /// A handshake-era client's `initialize` the child refused: when it answers
    /// `server/discover`, it speaks only 2026-07-28, and toolgate answers the client from
    /// that and bridges it.
    async fn reverse_if_refused(
        &self,
        pending: &Pending,
        handshake: Handshake,
        answer: &[u8],
    ) -> Option<Vec<u8>> {
        let id = pending.id.as_deref()?;
        let (ours, reverse) = self
            .process
            .reverse_if_refused(
                || self.gw.next_id(),
                self.timeout,
                id,
                handshake.params.as_deref(),
                answer,
            )
            .await?;
        self.reverse.set(Some(Arc::new(reverse)));
        Some(ours)
    }
}
