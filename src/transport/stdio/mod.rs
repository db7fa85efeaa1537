//! `toolgate stdio`: a desktop client launches toolgate and speaks newline-delimited JSON-RPC
//! on its stdin and stdout. This is the one stdio front; the server behind it is an
//! [`Upstream`]: a child process (`stdio -- CMD`, [`to_child`]) or a Streamable HTTP server
//! (`stdio --upstream URL`, [`over_http`]). The rules are the pipeline's, as over HTTP.
//!
//! stdout carries only JSON-RPC (toolgate's logs go to stderr). stdio servers stay silent on
//! malformed input, so toolgate answers malformed lines, non-JSON-RPC messages and over-long
//! lines itself.
//!
//! How a run ends is the front's, for both upstreams:
//! - the client closes stdin, or SIGTERM: what is in flight gets its answers for a grace
//!   period, then the server is ended (a child: stdin closed, SIGTERM, SIGKILL; an HTTP
//!   session: DELETE), what is still unanswered gets an error, and toolgate exits with 0;
//! - the server goes away (a child exits): every request in flight, and every request the
//!   client sends within a moment, gets an error, and toolgate exits with 1.

mod client;
mod in_flight;
mod lines;
pub mod over_http;
pub mod to_child;
mod traces;

use crate::error::UpstreamError;
pub(crate) use client::ToClient;
use client::{Out, next_message};
use in_flight::{Exchange, InFlight};

use crate::catalog::ScopeKey;
use crate::gateway::Target;
use crate::jsonrpc::{self, Body as Parsed, Message};
use crate::mcp::Era;
use crate::pipeline::Pending;
use crate::pipeline::engine::{self, Handled, Origin, Way};
use crate::pipeline::guard::{ListFailed, Lister};
use crate::pipeline::step::{self, Bridging};
use crate::telemetry::hop::HopParent;
use bytes::Bytes;
use serde_json::value::RawValue;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::BufReader;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long what is in flight, and then the server, get once toolgate itself was told to stop
/// (at most `stdio.shutdown_grace`, which they get when the client closes stdin).
const SHORT_GRACE: Duration = Duration::from_millis(300);

/// SIGTERM as a future; never ready where it cannot be caught.
pub(crate) struct Terminate(Option<tokio::signal::unix::Signal>);

impl Terminate {
    pub(crate) fn new() -> Terminate {
        Terminate(tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok())
    }

    pub(crate) async fn recv(&mut self) {
        match &mut self.0 {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending().await,
        }
    }
}

/// The server behind the stdio front. The front reads, parses and decides each message
/// (`pipeline::step`) and writes every answer; an upstream says how a message reaches its
/// server and carries it there.
pub(crate) trait Upstream: Send + Sync + Sized + 'static {
    /// How one message reaches the server, settled before the guard reads it: the era
    /// bridge, and over HTTP the headers taken from the message.
    type Way: Send + Sync + 'static;
    /// toolgate's own `tools/list`; a stdio client cannot be handed a refusal as it came.
    type Lister<'a>: Lister<Relay = std::convert::Infallible> + Send + Sync
    where
        Self: 'a;

    /// Whether each message is sent before the next is read (a child reads its stdin in
    /// order), or each is decided and sent on a task of its own (an HTTP server takes
    /// POSTs concurrently).
    const IN_ORDER: bool;

    fn target(&self) -> &Arc<Target>;
    /// The scope the server's listings are kept under for a message that goes `way` (over
    /// HTTP, its session's, or a bridged session's).
    fn key(&self, way: &Self::Way) -> ScopeKey;
    /// Settles how `m`, of `era`, reaches the server: the era bridge (asking the server's
    /// era the first time a 2026-07-28 request needs it), and the headers it goes with.
    fn way(&self, m: &Message<'_>, era: Era) -> impl Future<Output = Self::Way> + Send;
    fn bridging(way: &Self::Way) -> Bridging<'_>;
    /// toolgate's own `tools/list`, sent the way the message would go.
    fn lister<'a>(self: &'a Arc<Self>, way: &'a Self::Way) -> Self::Lister<'a>;
    /// Sends a message the pipeline forwards; the returned future writes what the server
    /// answers, or why there is no answer, through `sent.to`. A child is written to before
    /// this returns, so messages reach it in the client's order.
    fn exchange(
        self: Arc<Self>,
        way: Self::Way,
        sent: Forwarded,
    ) -> impl Future<Output = ()> + Send + 'static;
    /// Ends the server's side once the client is gone; says how it ended.
    fn end(&self, grace: Duration) -> impl Future<Output = String> + Send;
    /// Ends it now, when toolgate is told to stop during [`Upstream::end`].
    fn kill(&self) {}
}

/// A message on its way to the server.
pub(crate) struct Forwarded {
    pub(crate) body: Bytes,
    pub(crate) pending: Pending,
    /// Set when this is the client's `initialize`.
    pub(crate) handshake: Option<Handshake>,
    /// What the request's hop hangs under, when traces are exported.
    pub(crate) hop_parent: Option<Box<HopParent>>,
    pub(crate) to: ToClient,
}

/// The client's `initialize`, which an upstream may answer itself (era bridge) or open a
/// session with.
pub(crate) struct Handshake {
    pub(crate) params: Option<Box<RawValue>>,
}

/// One line from the client, as far as the server: toolgate's own answer is written here;
/// a forwarded message's exchange is returned, already sent when the upstream is in order.
async fn handle<U: Upstream>(
    up: &Arc<U>,
    to: &ToClient,
    line: &Bytes,
    mut m: Message<'_>,
) -> Option<Exchange<impl Future<Output = ()> + Send + 'static + use<U>>> {
    let gw = &to.gw;
    // A refused notification gets no answer on stdio; it is counted and goes no further.
    engine::admit(gw, up.target(), &m).ok()?;
    let era = Era::detect(None, || m.names_version());
    let mut way = StdioWay {
        way: up.way(&m, era).await,
        up: up.clone(),
        handshake: (m.is_request() && m.method() == Some("initialize")).then(|| Handshake {
            params: m.raw_params().map(ToOwned::to_owned),
        }),
        hop_parent: None,
        to: to.clone(),
    };
    let origin = Origin {
        target: up.target(),
        era,
        client: gw.client(None),
    };
    let begun = traces::Begun::of(gw, &m);
    let upstream = &up.target().name;
    match engine::handle(gw, origin, &mut m, line, &way).await {
        Handled::Forward(f) => {
            let owed = f.pending().clone();
            if let (Some(b), Some(id)) = (begun, owed.id.as_deref()) {
                way.hop_parent = Some(Box::new(b.hop_parent()));
                to.traces.wait(id, b, owed.kind.call_outcome());
            }
            // Boxed: the message's task would otherwise hold the exchange's future (4 KB
            // over HTTP) three times over, as it is decided, handed on and raced with the
            // stop (docs/performance.md).
            Some(Exchange {
                future: Box::pin(f.send(way, gw.clone(), up.target().clone())),
                owed,
            })
        }
        Handled::Answered(a) => {
            if let Some(b) = begun {
                b.end("answered", a.outcome, upstream);
            }
            to.write_owed(m.id.filter(|_| m.is_request()), a.body);
            None
        }
        Handled::Relayed(never) => match never {},
        Handled::Consumed => {
            if let Some(b) = begun {
                b.end("answered", None, upstream);
            }
            None
        }
    }
}

/// The stdio front's [`Way`] for one message: its upstream's way, what the client's
/// `initialize` said, and the client its answer is written to.
struct StdioWay<U: Upstream> {
    up: Arc<U>,
    way: U::Way,
    handshake: Option<Handshake>,
    /// Set when the request is forwarded and traced.
    hop_parent: Option<Box<HopParent>>,
    to: ToClient,
}

impl<U: Upstream> Way for StdioWay<U> {
    type Reply = ();

    fn key(&self) -> ScopeKey {
        self.up.key(&self.way)
    }

    fn bridging(&self) -> Bridging<'_> {
        U::bridging(&self.way)
    }

    fn send(self, body: Bytes, pending: Pending) -> impl Future<Output = ()> + Send {
        let sent = Forwarded {
            body,
            pending,
            handshake: self.handshake,
            hop_parent: self.hop_parent,
            to: self.to,
        };
        self.up.exchange(self.way, sent)
    }
}

/// toolgate's own `tools/list`, sent the way the message goes.
impl<U: Upstream> Lister for StdioWay<U> {
    type Relay = std::convert::Infallible;

    async fn list(
        &self,
        request: Bytes,
        id: &str,
    ) -> Result<Box<RawValue>, ListFailed<Self::Relay>> {
        self.up.lister(&self.way).list(request, id).await
    }
}

/// What the front reads of a message before it decides where the message is handled.
struct Glance {
    initialize: bool,
    /// A request's id (`jsonrpc::id_key`).
    id: Option<String>,
    /// The id of the request a `notifications/cancelled` cancels.
    cancels: Option<String>,
}

/// The client's line as one message; toolgate's own answer to one it cannot take (malformed,
/// a batch) is written here. A line that holds several messages is put in `several`, unread,
/// for [`first_of`] to take apart.
fn parse<'a>(to: &ToClient, line: &'a Bytes, several: &mut Option<Bytes>) -> Option<Message<'a>> {
    match jsonrpc::parse_from_client(line) {
        Ok(Parsed::Single(m)) => Some(m),
        Ok(Parsed::Batch(msgs)) => {
            // Over stdio each line is one message: always refused.
            to.write(step::batch(&msgs, false).err()?);
            None
        }
        Err(_) if jsonrpc::end_of_first_of_several(line).is_some() => {
            *several = Some(line.clone());
            None
        }
        Err(rejection) => {
            to.write(rejection.answer());
            None
        }
    }
}

/// The first message of a line that holds several, as a line of its own; the rest stay in
/// `several` (docs/contract.md §1). Each is found before it is read: a line refused whole
/// is read once, not once for each message in it.
fn first_of(mut line: Bytes, several: &mut Option<Bytes>) -> Bytes {
    if let Some(end) = jsonrpc::end_of_first_of_several(&line) {
        *several = Some(line.split_off(end));
    }
    line
}

/// Each message of `line` refused with `why`, however many it holds ([`first_of`]).
fn refuse_each(to: &ToClient, line: Bytes, why: &UpstreamError) {
    let mut several = Some(line);
    while let Some(rest) = several.take() {
        to.refuse(&first_of(rest, &mut several), why);
    }
}

fn glance(m: &Message<'_>) -> Glance {
    let key = |id: &RawValue| jsonrpc::id_key(id.get()).into_owned();
    Glance {
        initialize: m.is_request() && m.method() == Some("initialize"),
        id: m.id.filter(|_| m.is_request()).map(key),
        cancels: match m.method() == Some("notifications/cancelled") {
            true => m.cancelled_id().map(key),
            false => None,
        },
    }
}

enum End {
    ClientGone,
    Terminated,
    ServerGone(String),
}

/// Runs the front until the client or the server goes away; returns the process exit status.
/// `gone` ends, with how, when the server goes away on its own (a child's exit).
pub(crate) async fn serve<U: Upstream>(
    up: Arc<U>,
    to: ToClient,
    writer: JoinHandle<i32>,
    gone: Option<oneshot::Receiver<String>>,
) -> i32 {
    let full_grace = to.gw.config.stdio.shutdown_grace;
    let mut run = Run {
        stdin: BufReader::new(tokio::io::stdin()),
        several: None,
        in_flight: InFlight::new(),
        // SIGTERM ends toolgate as stdin's end does, the server first: both official SDKs
        // close stdin, wait two seconds, then send it, and a toolgate that died at once would
        // leave its server (in a process group of its own) running.
        term: Terminate::new(),
        gone,
        max: to.gw.config.limits.max_body_bytes,
        full_grace,
        short_grace: SHORT_GRACE.min(full_grace),
        up,
        to,
    };
    let status = match run.read().await {
        End::ServerGone(how) => run.server_gone(how).await,
        end => run.client_gone(matches!(end, End::Terminated)).await,
    };
    // The spans of the last second would go with the process.
    if let Some(t) = &run.to.gw.telemetry {
        t.flush(Duration::from_secs(2)).await;
    }
    let _ = run.to.out.send(Out::Exit(status));
    // A client that closed stdin and reads nothing more would hold the writer, and with it
    // toolgate, for ever: its last answers get the grace a request in flight gets.
    match tokio::time::timeout(full_grace, writer).await {
        Ok(written) => written.unwrap_or(1),
        Err(_) => {
            tracing::warn!(
                "the client read none of what was left for it within {full_grace:?}; toolgate exits without it"
            );
            status
        }
    }
}

/// One run of the front: what it reads, what is in flight, and how it may end.
struct Run<U> {
    up: Arc<U>,
    to: ToClient,
    stdin: BufReader<tokio::io::Stdin>,
    /// What is left of a line that held several messages, read before the next line.
    several: Option<Bytes>,
    in_flight: InFlight,
    term: Terminate,
    gone: Option<oneshot::Receiver<String>>,
    max: usize,
    full_grace: Duration,
    short_grace: Duration,
}

impl<U: Upstream> Run<U> {
    /// Reads and hands on the client's messages until the client, a signal or the server
    /// ends the run.
    async fn read(&mut self) -> End {
        let max_in_flight = self.to.gw.config.stdio.max_in_flight;
        let (up, to) = (&self.up, &self.to);
        loop {
            let next = tokio::select! {
                how = server_gone(&mut self.gone) => return End::ServerGone(how),
                () = self.term.recv() => return End::Terminated,
                m = async {
                    self.in_flight.room(max_in_flight).await;
                    to.paced().await;
                    match self.several.take() {
                        Some(several) => Some(first_of(several, &mut self.several)),
                        None => next_message(&mut self.stdin, self.max, to).await,
                    }
                } => m,
            };
            let Some(line) = next else {
                return End::ClientGone;
            };
            let Some(m) = parse(to, &line, &mut self.several) else {
                continue;
            };
            let Glance {
                initialize,
                id,
                cancels,
            } = glance(&m);
            // A second request under an id in flight would take the first one's answer.
            if id.as_deref().is_some_and(|id| to.owed.holds(id)) {
                to.write(jsonrpc::error_response(
                    m.id,
                    jsonrpc::INVALID_REQUEST,
                    jsonrpc::STILL_IN_FLIGHT,
                    None,
                ));
                continue;
            }
            // `initialize` is answered before the next message is read: its answer carries
            // the session (and the era) the rest need. A notification or a client's answer
            // is taken by the server before what the client wrote after it is sent (a
            // `tools/list` must not overtake `notifications/initialized`): concurrency starts
            // only among requests.
            if initialize || id.is_none() {
                let ex = handle(up, to, &line, m).await;
                // A cancelled request's exchange ends here: after the cancellation's way is
                // found, which reads the id that request went with, and before the
                // cancellation goes, so an answer sent meanwhile is not passed on.
                if let Some(cancelled) = cancels {
                    to.owed.withdraw(&cancelled);
                    to.traces
                        .end(&cancelled, "cancelled", &self.up.target().name);
                }
                match ex {
                    Some(ex) if U::IN_ORDER && !initialize => self.in_flight.wait(ex, to, id),
                    Some(ex) => ex.future.await,
                    None => {}
                }
            } else if U::IN_ORDER {
                if let Some(ex) = handle(up, to, &line, m).await {
                    self.in_flight.wait(ex, to, id);
                }
            } else {
                // Decided on a task of its own, where the line is parsed again: a message
                // cannot travel with the line it borrows from, and a parse costs about one
                // read of it.
                let (u, t, l) = (up.clone(), to.clone(), line.clone());
                self.in_flight.spawn(to, line, id, async move {
                    let m = parse(&t, &l, &mut None)?;
                    handle(&u, &t, &l, m).await
                });
            }
        }
    }

    /// The server ended first: what is in flight, and what the client sends within a moment,
    /// is told how. The run fails.
    async fn server_gone(&mut self, how: String) -> i32 {
        tracing::error!("the tool server {how} while the client was connected; toolgate stops");
        let why = Arc::new(UpstreamError::Unreachable(format!("the tool server {how}")));
        self.in_flight.stop(why.clone()).await;
        // Requests the client sent before it could know (already in the pipe, or arriving
        // within a moment) get the same error instead of no answer, while the client reads
        // what it is sent: until it is quiet for 200 ms, and no longer than the grace a
        // request in flight has, so that a client that keeps sending cannot keep toolgate.
        if let Some(several) = self.several.take() {
            refuse_each(&self.to, several, &why);
        }
        let (stdin, to) = (&mut self.stdin, &self.to);
        let until = tokio::time::Instant::now() + self.full_grace;
        let quiet = || {
            Duration::from_millis(200)
                .min(until.saturating_duration_since(tokio::time::Instant::now()))
        };
        while let Ok(Some(line)) = tokio::time::timeout(quiet(), async {
            to.paced().await;
            next_message(stdin, self.max, to).await
        })
        .await
        {
            refuse_each(&self.to, line, &why);
        }
        // A server that closed its output may still run, and can never answer again; one
        // that exited is only reaped here.
        let how = self.up.end(self.short_grace).await;
        tracing::debug!("the tool server {how}");
        1
    }

    /// The client closed stdin, or SIGTERM came: what is in flight gets its grace, then the
    /// server is ended and what is left is told how.
    async fn client_gone(&mut self, mut terminated: bool) -> i32 {
        let wait = if terminated {
            self.short_grace
        } else {
            self.full_grace
        };
        tokio::select! {
            () = self.in_flight.settled() => {}
            () = tokio::time::sleep(wait) => {}
            () = self.term.recv(), if !terminated => terminated = true,
        }
        // A SIGTERM (first, during the wait above, or while the server takes its time) cuts
        // the server's grace short.
        let grace = if terminated {
            self.short_grace
        } else {
            self.full_grace
        };
        let how = tokio::select! {
            how = self.up.end(grace) => how,
            () = self.term.recv() => {
                self.up.kill();
                "was killed: toolgate was told to stop".to_string()
            }
        };
        if terminated {
            tracing::info!("SIGTERM: the tool server {how}");
        } else {
            tracing::info!("the client closed stdin; the tool server {how}");
        }
        let why = format!("the tool server {how} before answering, after the client closed stdin");
        self.in_flight
            .stop(Arc::new(UpstreamError::Unreachable(why)))
            .await;
        // What the server wrote before it exited still goes out: its reader hands everything
        // over before it reports the exit.
        if let Some(g) = self.gone.take() {
            let _ = tokio::time::timeout(self.full_grace, g).await;
        }
        0
    }
}

async fn server_gone(gone: &mut Option<oneshot::Receiver<String>>) -> String {
    match gone.as_mut() {
        Some(g) => {
            let how = g.await.unwrap_or_else(|_| "exited".into());
            *gone = None;
            how
        }
        None => std::future::pending().await,
    }
}
