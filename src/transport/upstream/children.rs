//! The children behind `toolgate serve -- CMD`: one per legacy session, plus one shared
//! child for stateless (modern) requests, which toolgate initializes itself.
//!
//! A session's child is started by its `initialize` and ended by DELETE, by idling past
//! `stdio.idle_timeout`, or by its own exit; a crash ends that session only (its next request
//! gets 404, so the client starts a new one with a fresh child). What a child sends on its own
//! (notifications, server requests) goes to its session's GET stream, except what is about a
//! request answered as a stream (its progress), which goes there.

use crate::error::UpstreamError;
use crate::gateway::{Gateway, Live, Target};
use crate::jsonrpc::{self, Body as Parsed};
use crate::locks::MutexExt;
use crate::lograte::warn_at_rate;
use crate::mcp::Era;
use crate::net::outbound::{Outbound, Place};
use crate::pipeline;
use crate::pipeline::bridge::{Declared, Reverse};
use crate::pipeline::subscriptions;
use crate::transport::upstream::child::{ChildProcess, ChildSource, FromChild, Handler, ServerEra};
use crate::transport::upstream::multiplex::Multiplexed;
use crate::transport::upstream::paced;
use crate::transport::upstream::restarts::Restarts;
use crate::transport::upstream::subscribers::Subscribers;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

type Sessions = Arc<Mutex<HashMap<String, Arc<SessionChild>>>>;

pub struct SessionChild {
    pub child: Arc<ChildProcess>,
    /// Who opened the session (see `stdio.max_sessions_per_client`).
    owner: Box<str>,
    last_used: Mutex<Instant>,
    /// The session's open GET stream, which takes what the child sends on its own: the one
    /// opened last (a client that opens another has given up the one before; each message
    /// goes on one stream only).
    get: Mutex<Option<paced::Sender>>,
    /// What it sent while no GET stream was open (a server asks `roots/list` right after
    /// `notifications/initialized`, before the client has opened one): handed to the next
    /// stream first. Bounded; its lock also orders a subscription against a message.
    backlog: Mutex<Backlog>,
    /// The streams waiting for what the child sends about one request: that request's
    /// progress, or a `subscriptions/listen` request's notifications. Keyed by the raw JSON
    /// of the progress token: on the shared child the id toolgate gave the request, which it
    /// also gives as the progress token and which the server uses as the subscription id; in
    /// a session, the client's own token.
    related: Mutex<HashMap<Box<str>, Related>>,
    /// A message about a request whose stream was full, held (and the child's output with
    /// it) until that stream takes it.
    stalled: Mutex<Option<Stalled>>,
    /// Serves requests without a session: it has no GET stream to keep messages for.
    shared: bool,
    /// Serves 2026-07-28 requests over the handshake era (`pipeline::bridge`): the server's
    /// `initialize` result.
    bridged: std::sync::OnceLock<Box<RawValue>>,
    /// The capabilities its handshake declared for a bridged 2026-07-28 client, as JSON text
    /// (`""`: none).
    declared: std::sync::OnceLock<Box<str>>,
    /// Serves a handshake-era session over 2026-07-28 (`pipeline::bridge::Reverse`): set
    /// when the server refused the session's `initialize` and answered `server/discover`.
    reverse: std::sync::OnceLock<Arc<Reverse>>,
    /// On the shared child, where the ids are toolgate's: each request in flight by who sent
    /// it and its own id (`jsonrpc::id_key`), to toolgate's id for it. A client's
    /// cancellation names its own requests and no other's.
    pub(crate) multiplexed: Arc<Multiplexed>,
    /// Bridged, its 2026-07-28 clients' `subscriptions/listen` streams, which what the child
    /// announces on its own goes to (`upstream::subscribers`).
    pub(crate) subscribers: Arc<Subscribers>,
    /// A process's place among the stdio servers the descriptor limit leaves room for
    /// (`net::outbound`), given back once its session has ended; `None` for an HTTP+SSE
    /// server's session, whose connection has a place of its own, and for the stdio front's
    /// one child.
    _running: Option<Place>,
}

/// What a notification from the child is about, when it says (see `SessionChild::related`).
#[derive(Deserialize)]
struct About<'a> {
    #[serde(borrow)]
    params: Option<AboutParams<'a>>,
}

#[derive(Deserialize)]
struct AboutParams<'a> {
    #[serde(borrow, rename = "progressToken")]
    progress_token: Option<&'a RawValue>,
    #[serde(borrow, rename = "_meta")]
    meta: Option<AboutMeta<'a>>,
}

#[derive(Deserialize)]
struct AboutMeta<'a> {
    #[serde(borrow, rename = "io.modelcontextprotocol/subscriptionId")]
    subscription: Option<&'a RawValue>,
}

/// Where a stream for one request is registered; leaving it ends the registration.
pub struct Relation {
    child: Arc<SessionChild>,
    key: Box<str>,
}

impl Drop for Relation {
    fn drop(&mut self) {
        self.child.related.locked().remove(&self.key);
    }
}

/// How long a full stream may hold a session's child's output back. A client that reads
/// nothing for that long (a stuck one) would hold its session's other requests with it: what
/// the child sends about its request is dropped whenever the stream is full from then on
/// (said once; its answer still comes); a GET stream is closed, and what comes is kept for
/// the next.
const LAG: Duration = Duration::from_secs(5);

/// The same on the shared child, whose output every client without a session waits on: a
/// client that reads at all takes a message sooner, and one that is stuck holds the others
/// back this long at most.
const SHARED_LAG: Duration = Duration::from_millis(250);

/// A stream waiting for what the child sends about one request.
struct Related {
    /// Bounded in messages and bytes ([`paced`]). A full stream holds the child's output
    /// back, as a client's own pipe would hold a server it reads: nothing is dropped for a
    /// client that reads, however fast the server writes.
    sink: paced::Sender,
    /// It was full for [`LAG`] ([`SHARED_LAG`]): what comes for it while it is full is
    /// dropped from then on.
    lagging: bool,
}

struct Stalled {
    /// The request whose stream it is, by its key in `related`; `None`: the GET stream.
    key: Option<Box<str>>,
    sink: paced::Sender,
    line: Bytes,
}

/// Capability sets of 2026-07-28 clients given a bridged shared child of their own.
const MAX_CAPABILITY_SETS: usize = 8;

/// Messages kept for a GET stream that is not open yet, and their bytes at most (the newest
/// message is kept whatever its size).
const BACKLOG: usize = 256;
const BACKLOG_BYTES: usize = 16 << 20;

/// What a session's child sent while no GET stream was open. Were each drop said, a client
/// that never opens one (many only POST) would put a line in the log for each of its server's
/// later messages: the first drop is said at `WARN`, the rest counted and said when a stream
/// takes the backlog.
#[derive(Default)]
struct Backlog {
    kept: VecDeque<Bytes>,
    /// The bytes of `kept`.
    bytes: usize,
    dropped: u64,
}

impl Backlog {
    fn keep(&mut self, line: Bytes, child: &ChildProcess) {
        self.bytes += line.len();
        self.kept.push_back(line);
        while self.kept.len() > BACKLOG || (self.bytes > BACKLOG_BYTES && self.kept.len() > 1) {
            let oldest = self.kept.pop_front().expect("more than one kept");
            self.bytes -= oldest.len();
            self.dropped += 1;
            if self.dropped == 1 {
                tracing::warn!(server = %child.program(), pid = child.pid(), "no GET stream has taken the tool server's last {BACKLOG} messages (or {} MiB): the oldest are dropped until one opens (said once until then)", BACKLOG_BYTES >> 20);
            }
        }
    }

    /// What was kept, for a stream that opens.
    fn take(&mut self) -> Vec<Bytes> {
        self.bytes = 0;
        self.kept.drain(..).collect()
    }
}

impl SessionChild {
    /// A GET stream's receiver, and what was sent before it opened. The stream opened before
    /// it, if one still was, ends.
    pub(crate) fn subscribe(&self) -> (Vec<Bytes>, paced::Receiver) {
        let mut backlog = self.backlog.locked();
        let (tx, rx) = paced::channel();
        *self.get.locked() = Some(tx);
        let dropped = std::mem::take(&mut backlog.dropped);
        if dropped > 0 {
            tracing::info!(server = %self.child.program(), pid = self.child.pid(), dropped, "a GET stream opened; the oldest of what the tool server sent before were dropped");
        }
        (backlog.take(), rx)
    }

    /// Passes a message the child sent on its own to the stream of the request it is about,
    /// else (in a session) to the open GET stream, or keeps it for the next one.
    fn deliver(&self, line: Bytes) {
        let Some(line) = self.heard(line) else { return };
        let line = match self.deliver_related(line) {
            Ok(()) => return,
            Err(line) => line,
        };
        if self.shared {
            // Without a session, nothing else could be waiting for it.
            if !self.subscribers.offer(&line) {
                tracing::debug!(
                    "a message from the shared tool server is about no waiting request; dropped"
                );
            }
            return;
        }
        self.to_get_stream(line);
    }

    /// To the session's GET stream (held while it is full), or kept for the next one.
    fn to_get_stream(&self, line: Bytes) {
        let mut backlog = self.backlog.locked();
        let mut get = self.get.locked();
        let Some(sink) = get.as_ref() else {
            return backlog.keep(line, &self.child);
        };
        let line = match sink.try_send(line) {
            Ok(()) => return,
            Err(paced::TrySendError::Full(line)) => {
                let sink = sink.clone();
                *self.stalled.locked() = Some(Stalled {
                    key: None,
                    sink,
                    line,
                });
                return;
            }
            Err(paced::TrySendError::Closed(line)) => line,
        };
        // The stream is gone (its client left).
        *get = None;
        backlog.keep(line, &self.child);
    }

    /// A message about a request whose answer is a stream (its progress, a listen request's
    /// notifications) goes to that stream (held, when it is full, until [`Self::unstall`]);
    /// `Err` gives back one that is about none. Read only while some request waits for such
    /// messages.
    fn deliver_related(&self, line: Bytes) -> Result<(), Bytes> {
        if self.related.locked().is_empty() {
            return Err(line);
        }
        let key = serde_json::from_slice::<About<'_>>(&line)
            .ok()
            .and_then(|a| a.params)
            .and_then(|p| {
                p.progress_token
                    .or(p.meta.and_then(|m| m.subscription))
                    .map(|k| jsonrpc::id_key(k.get()).into_owned())
            });
        let Some((key, sink, lagging)) = key.and_then(|k| {
            let related = self.related.locked();
            let r = related.get(k.as_str())?;
            Some((k, r.sink.clone(), r.lagging))
        }) else {
            return Err(line);
        };
        // A stream given up once no longer holds the child back: it takes what fits.
        if let Err(paced::TrySendError::Full(line)) = sink.try_send(line)
            && !lagging
        {
            let key = Some(key.into());
            *self.stalled.locked() = Some(Stalled { key, sink, line });
        }
        Ok(())
    }

    /// Waits until a message held for a full stream is taken, for [`LAG`] ([`SHARED_LAG`])
    /// at most; the child's reader waits here before it reads on.
    pub(crate) async fn unstall(&self) {
        // One kept for the next GET stream may find it full too.
        loop {
            let Some(stalled) = self.stalled.locked().take() else {
                return;
            };
            self.wait_for_room(stalled).await;
        }
    }

    async fn wait_for_room(&self, Stalled { key, sink, line }: Stalled) {
        let lag = if self.shared { SHARED_LAG } else { LAG };
        let reserved = tokio::time::timeout(lag, sink.room_for(&line)).await;
        if let Ok(Some(room)) = reserved {
            return room.send(line);
        }
        let Some(key) = key else {
            return self.get_stream_stuck(&sink, line, lag);
        };
        // Else its stream is gone: nothing waits for the message.
        if reserved.is_err() {
            if let Some(r) = self.related.locked().get_mut(&key) {
                r.lagging = true;
            }
            tracing::warn!(server = %self.child.program(), pid = self.child.pid(), "a client has read nothing of its request's stream for {lag:?}: what the tool server sends about that request is dropped whenever the stream is full from now on, its answer still goes");
        }
    }

    /// The GET stream `sink` took nothing for `lag`, or is gone: it is closed, and `line`
    /// kept for the next.
    fn get_stream_stuck(&self, sink: &paced::Sender, line: Bytes, lag: Duration) {
        let mut get = self.get.locked();
        if get.as_ref().is_some_and(|g| g.same_channel(sink)) {
            *get = None;
            if !sink.is_closed() {
                tracing::warn!(server = %self.child.program(), pid = self.child.pid(), "a client has read nothing of its session's GET stream for {lag:?}: the stream is closed, and what the tool server sends is kept for the next");
            }
        }
        drop(get);
        self.to_get_stream(line);
    }

    /// Registers a stream for what the child sends about the request whose progress token
    /// (or, on the shared child, id) is the raw JSON `id`.
    pub(crate) fn relate(self: &Arc<Self>, id: &str) -> (Relation, paced::Receiver) {
        let (tx, rx) = paced::channel();
        let key: Box<str> = jsonrpc::id_key(id).into();
        let related = Related {
            sink: tx,
            lagging: false,
        };
        self.related.locked().insert(key.clone(), related);
        (
            Relation {
                child: self.clone(),
                key,
            },
            rx,
        )
    }

    /// The server's `initialize` result when this child serves 2026-07-28 requests over the
    /// handshake era.
    pub fn bridged(&self) -> Option<&RawValue> {
        self.bridged.get().map(|b| &**b)
    }

    /// How a handshake-era session reaches a server that speaks only 2026-07-28.
    pub fn reverse(&self) -> Option<&Arc<Reverse>> {
        self.reverse.get()
    }

    /// `line`, which the child sent on its own, as its client is to read it: before a server
    /// of 2026-07-28, toolgate's own stream of what the server announces is read as its
    /// handshake-era client reads what its server sends on its own (`None`: nothing of it
    /// goes on).
    pub(crate) fn heard(&self, line: Bytes) -> Option<Bytes> {
        match self.reverse() {
            Some(_) => subscriptions::untagged(&line),
            None => Some(line),
        }
    }

    /// From now on, its handshake-era client is served over 2026-07-28, and what the server
    /// announces is followed for it (`upstream::announced`), each request of toolgate's under
    /// an id of `gw`'s.
    pub fn set_reverse(self: &Arc<Self>, reverse: Reverse, gw: Arc<Gateway>) {
        if self.reverse.set(Arc::new(reverse)).is_ok() {
            let ids = move || gw.next_id();
            tokio::spawn(super::announced::follow_child(Arc::downgrade(self), ids));
        }
    }

    fn touch(&self) {
        *self.last_used.locked() = Instant::now();
    }

    /// The stdio front's one child: the front hears what it sends on its own itself (and
    /// offers it to `subscribers`), and settles its era.
    pub(crate) fn of_pipe(
        child: Arc<ChildProcess>,
        subscribers: Arc<Subscribers>,
    ) -> Arc<SessionChild> {
        Arc::new(SessionChild {
            child,
            owner: "stdio".into(),
            last_used: Mutex::new(Instant::now()),
            get: Mutex::default(),
            backlog: Mutex::default(),
            related: Mutex::default(),
            stalled: Mutex::default(),
            shared: false,
            bridged: std::sync::OnceLock::new(),
            declared: std::sync::OnceLock::new(),
            reverse: std::sync::OnceLock::new(),
            multiplexed: Arc::default(),
            subscribers,
            // The front's one child, started with it: not one of many to bound.
            _running: None,
        })
    }

    /// From now on, 2026-07-28 requests reach it over the handshake it answered so.
    pub(crate) fn bridge(&self, init: Box<RawValue>) {
        let _ = self.bridged.set(init);
    }

    /// This child, noted as used now.
    fn used(self: Arc<Self>) -> Arc<Self> {
        self.touch();
        self
    }

    /// The capabilities its handshake declared for a bridged 2026-07-28 client.
    pub fn declared(&self) -> Option<&str> {
        self.declared.get().map(|d| &**d)
    }

    /// Read from the child's output, which ends before its exit is reaped and reported:
    /// a session is over from that moment, so no request is sent to a child that will
    /// not answer.
    fn alive(&self) -> bool {
        !self.child.has_ended()
    }
}

/// What a child of the pool sends on its own, and its end, as the pool hears them.
struct Heard {
    live: Live,
    index: usize,
    key: crate::catalog::ScopeKey,
    label: String,
    sessions: std::sync::Weak<Mutex<HashMap<String, Arc<SessionChild>>>>,
    /// The child's session, set right after the child starts: it can speak before.
    deliver_to: Arc<std::sync::OnceLock<std::sync::Weak<SessionChild>>>,
    /// Where an end of its own before it said anything goes.
    restarts: Arc<Restarts>,
}

impl Handler for Heard {
    fn handle(&self, ev: FromChild) {
        match ev {
            FromChild::Message(line) => {
                if let Ok(Parsed::Single(m)) = jsonrpc::parse(&line) {
                    pipeline::observe_unsolicited(&self.live.load(), &self.key, &m);
                }
                // Set right after the child starts, with nothing to wait for in between.
                if let Some(sc) = self.deliver_to.wait().upgrade() {
                    sc.deliver(line);
                }
            }
            FromChild::Exited(how) => self.exited(&how),
        }
    }

    fn ready(&self) -> impl Future<Output = ()> + Send {
        let sc = self.deliver_to.get().and_then(std::sync::Weak::upgrade);
        async move {
            if let Some(sc) = sc {
                sc.unstall().await;
            }
        }
    }
}

impl Heard {
    fn exited(&self, how: &str) {
        let (gw, label) = (self.live.load(), &self.label);
        gw.catalog.forget(&self.key);
        let sc = self.deliver_to.get().and_then(std::sync::Weak::upgrade);
        // Nothing more will be announced: its streams end, and their clients listen anew.
        if let Some(sc) = &sc {
            sc.subscribers.end();
        }
        let upstream = &gw.targets[self.index].name;
        gw.metrics.children.add(upstream, -1);
        // Still registered: it exited on its own, a fault. Otherwise toolgate ended the
        // session (DELETE, idle, shutdown), and `close` says so.
        let removed = self.sessions.upgrade().and_then(|s| {
            let mut s = s.locked();
            let removed = s.remove(label);
            gw.metrics.sessions.set(upstream, s.len() as i64);
            removed
        });
        let on_its_own = removed.is_some();
        // The shared child is never registered as a session; toolgate stops it only at
        // shutdown.
        let shared_failed = (sc.as_ref()).is_some_and(|sc| sc.shared && !sc.child.stopping());
        if on_its_own || shared_failed {
            let spoken = sc.as_ref().is_some_and(|sc| sc.child.spoken());
            self.restarts.ended(spoken, how);
        }
        // A child that only closed its output runs on, its process group with it; one that
        // exited is reaped.
        if let Some(sc) = removed {
            let grace = gw.config.stdio.shutdown_grace;
            tokio::spawn(async move { sc.child.shutdown(grace).await });
        }
        // At a rate: a client that crashes its server with every request it sends would
        // otherwise write a line for each.
        let said = &gw.targets[self.index].repeats;
        if on_its_own {
            let why = format!("the tool server {how}; its session ends");
            warn_at_rate!(said, "session_child_exited", { session = %label, }, why);
        } else if shared_failed {
            let why =
                format!("the tool server {how}; the next request without a session starts another");
            warn_at_rate!(said, "shared_child_exited", { session = %label, }, why);
        } else {
            tracing::debug!(session = %label, "the tool server {how}");
        }
    }
}

pub struct StdioPool {
    source: ChildSource,
    sessions: Sessions,
    /// The children for requests without a session, one per era: a 2026-07-28 server refuses
    /// stateless requests on a process that was initialized, and a legacy one needs the
    /// handshake. Index: `Era::Legacy` 0, `Era::Modern` 1.
    shared: [tokio::sync::Mutex<Option<Arc<SessionChild>>>; 2],
    /// When the 2026-07-28 one speaks only the handshake, which it was opened with for its
    /// first client: a child for each other capability set its clients declare (such a server
    /// lists and asks by what its client can do), at most [`MAX_CAPABILITY_SETS`].
    by_capabilities: tokio::sync::Mutex<HashMap<Box<str>, Arc<SessionChild>>>,
    /// Read anew at each use, so a reload's limits reach running sessions too.
    live: Live,
    /// The upstream's position in the gateway's targets (stable across reloads).
    index: usize,
    /// When a new process may start, after processes that ended before they said anything.
    restarts: Arc<Restarts>,
}

/// Why no child could serve a request.
pub enum NoChild {
    UnknownSession,
    TooMany,
    TooManyForClient(usize),
    Failed(UpstreamError),
}

impl StdioPool {
    pub fn new(live: Live, index: usize, source: ChildSource) -> Arc<StdioPool> {
        let pool = Arc::new(StdioPool {
            source,
            sessions: Sessions::default(),
            shared: Default::default(),
            by_capabilities: Default::default(),
            live,
            index,
            restarts: Arc::default(),
        });
        let weak = Arc::downgrade(&pool);
        let every = (Self::target(&pool.gw(), index).stdio.idle_timeout / 2)
            .clamp(Duration::from_millis(100), Duration::from_secs(5));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            loop {
                tick.tick().await;
                let Some(pool) = weak.upgrade() else { return };
                pool.reap_idle().await;
            }
        });
        pool
    }

    fn gw(&self) -> Arc<Gateway> {
        self.live.load()
    }

    fn target(gw: &Gateway, index: usize) -> Arc<Target> {
        gw.targets[index].clone()
    }

    /// A new child: a session's own, opened by `owner` with its request's `headers`, or,
    /// `None`, one clients share.
    fn spawn(
        &self,
        label: String,
        opener: Option<(&str, &http::HeaderMap)>,
    ) -> Result<Arc<SessionChild>, NoChild> {
        let (owner, shared, client) = match opener {
            Some((owner, headers)) => (owner, false, Some(headers)),
            None => ("", true, None),
        };
        if let Some(why) = self.restarts.refused() {
            return Err(NoChild::Failed(why));
        }
        let gw = self.gw();
        let index = self.index;
        let handler = Heard {
            live: self.live.clone(),
            index,
            key: gw.scope(&Self::target(&gw, index), Some(label.as_bytes()), []),
            label: label.clone(),
            sessions: Arc::downgrade(&self.sessions),
            deliver_to: Arc::default(),
            restarts: self.restarts.clone(),
        };
        let deliver_to = handler.deliver_to.clone();
        let running = match &self.source {
            ChildSource::Command(_) => Some(Outbound::children().take().map_err(NoChild::Failed)?),
            ChildSource::EventStream(_) => None,
        };
        let child = (self.source)
            .start((&gw, &Self::target(&gw, index), client), handler)
            // Said where every failure is (`error::FailureLog`), not once per session it fails.
            .map_err(|e| NoChild::Failed(UpstreamError::CannotStart(e.to_string())))?;
        let upstream = &Self::target(&gw, index).name;
        gw.metrics.children.add(upstream, 1);
        // Its stderr lines carry its program and pid: this line ties them to the server.
        let (program, pid) = (child.program(), child.pid());
        tracing::info!(session = %label, %upstream, server = %program, pid, "{}", child.started());
        let sc = Arc::new(SessionChild {
            child,
            owner: owner.into(),
            last_used: Mutex::new(Instant::now()),
            get: Mutex::default(),
            backlog: Mutex::default(),
            related: Mutex::default(),
            stalled: Mutex::default(),
            shared,
            bridged: std::sync::OnceLock::new(),
            declared: std::sync::OnceLock::new(),
            reverse: std::sync::OnceLock::new(),
            multiplexed: Arc::default(),
            subscribers: Arc::default(),
            _running: running,
        });
        let _ = deliver_to.set(Arc::downgrade(&sc));
        Ok(sc)
    }

    /// A new session's child for `owner`, whose `initialize` came with `headers`, with the
    /// session id toolgate minted for it.
    pub fn open(
        &self,
        owner: &str,
        headers: &http::HeaderMap,
    ) -> Result<(String, Arc<SessionChild>), NoChild> {
        let limits = &Self::target(&self.gw(), self.index).stdio;
        {
            let sessions = self.sessions.locked();
            if sessions.len() >= limits.max_sessions {
                return Err(NoChild::TooMany);
            }
            let held = sessions.values().filter(|s| &*s.owner == owner).count();
            if held >= limits.max_sessions_per_client {
                return Err(NoChild::TooManyForClient(limits.max_sessions_per_client));
            }
        }
        let rs = std::collections::hash_map::RandomState::new();
        let id = format!("{:016x}{:016x}", rs.hash_one(1u8), rs.hash_one(2u8));
        let sc = self.spawn(id.clone(), Some((owner, headers)))?;
        let open = {
            let mut sessions = self.sessions.locked();
            sessions.insert(id.clone(), sc.clone());
            sessions.len()
        };
        self.count_sessions(open);
        Ok((id, sc))
    }

    fn count_sessions(&self, open: usize) {
        let gw = self.gw();
        let upstream = &Self::target(&gw, self.index).name;
        gw.metrics.sessions.set(upstream, open as i64);
    }

    pub fn session(&self, id: &str) -> Result<Arc<SessionChild>, NoChild> {
        let sc = self
            .sessions
            .locked()
            .get(id)
            .filter(|sc| sc.alive())
            .cloned()
            .ok_or(NoChild::UnknownSession)?;
        sc.touch();
        Ok(sc)
    }

    /// Ends a session; `false` when there was none.
    pub async fn close(&self, id: &str) -> bool {
        let (sc, open) = {
            let mut sessions = self.sessions.locked();
            (sessions.remove(id), sessions.len())
        };
        let Some(sc) = sc else { return false };
        self.count_sessions(open);
        let how = sc
            .child
            .shutdown(self.gw().config.stdio.shutdown_grace)
            .await;
        tracing::info!(session = %id, "session ended; the tool server {how}");
        true
    }

    /// Ends the `subscriptions/listen` streams served from its children on purpose (toolgate
    /// shuts down): only children shared by 2026-07-28 clients serve any.
    pub(crate) async fn end_subscriptions(&self) {
        for shared in &self.shared {
            if let Some(sc) = &*shared.lock().await {
                sc.subscribers.close();
            }
        }
        for sc in self.by_capabilities.lock().await.values() {
            sc.subscribers.close();
        }
    }

    /// Stops every child (shutdown of toolgate).
    pub async fn close_all(&self) {
        let ids: Vec<String> = self.sessions.locked().keys().cloned().collect();
        for id in ids {
            self.close(&id).await;
        }
        let grace = self.gw().config.stdio.shutdown_grace;
        for shared in &self.shared {
            if let Some(sc) = shared.lock().await.take() {
                sc.child.shutdown(grace).await;
            }
        }
        for (_, sc) in self.by_capabilities.lock().await.drain() {
            sc.child.shutdown(grace).await;
        }
    }

    /// The child for requests without a session in `era`, started on first use (and again
    /// after it exits). A legacy one is opened with the handshake. A 2026-07-28 one is asked
    /// `server/discover` and then asked nothing more, since every request carries what the
    /// handshake would have said; when it answers with an error it speaks only the handshake,
    /// and is opened with it to serve through the bridge (`ChildProcess::settle_era`).
    ///
    /// A bridged one's handshake carries what its client says of itself (`client`, read only
    /// when needed), and clients that declare other capabilities get children of their own.
    pub async fn shared(
        &self,
        era: Era,
        client: impl FnOnce() -> Declared,
    ) -> Result<Arc<SessionChild>, NoChild> {
        let mut shared = self.shared[usize::from(era == Era::Modern)].lock().await;
        let running = shared.as_ref().filter(|sc| sc.alive()).cloned();
        let client = match (running, era) {
            (Some(sc), Era::Legacy) => return Ok(sc.used()),
            (Some(sc), Era::Modern) if sc.bridged.get().is_none() => return Ok(sc.used()),
            (Some(sc), Era::Modern) => {
                let client = client();
                if sc.declared.get().map(|d| &**d) == Some(client.capabilities_text()) {
                    return Ok(sc.used());
                }
                drop(shared);
                return self.for_capabilities(client, sc).await;
            }
            (None, Era::Legacy) => None,
            (None, Era::Modern) => Some(client()),
        };
        let label = match era {
            Era::Legacy => "shared",
            Era::Modern => "shared-2026-07-28",
        };
        let sc = self.spawn(label.into(), None)?;
        match client {
            Some(client) => self.open_modern(&sc, &client).await?,
            None => {
                let gw = self.gw();
                sc.child
                    .initialize(
                        &gw.next_id(),
                        Self::target(&gw, self.index).limits.upstream_timeout,
                    )
                    .await
                    .map_err(|e| NoChild::Failed(UpstreamError::Unreachable(e.to_string())))?;
            }
        }
        *shared = Some(sc.clone());
        Ok(sc)
    }

    /// The shared 2026-07-28 child, bridged, for a client of other capabilities than the
    /// first one's: its own, or, past [`MAX_CAPABILITY_SETS`], the first one's.
    async fn for_capabilities(
        &self,
        client: Declared,
        first: Arc<SessionChild>,
    ) -> Result<Arc<SessionChild>, NoChild> {
        let mut children = self.by_capabilities.lock().await;
        children.retain(|_, sc| sc.alive());
        if let Some(sc) = children.get(client.capabilities_text()) {
            return Ok(sc.clone().used());
        }
        if children.len() >= MAX_CAPABILITY_SETS {
            tracing::warn!(
                "over {MAX_CAPABILITY_SETS} capability sets of 2026-07-28 clients bridged to one stdio server; this one shares the first client's"
            );
            return Ok(first.used());
        }
        let label = format!("shared-2026-07-28-{}", children.len() + 1);
        let sc = self.spawn(label, None)?;
        self.open_modern(&sc, &client).await?;
        children.insert(client.capabilities_text().into(), sc.clone());
        Ok(sc)
    }

    /// Settles a new shared child's era for 2026-07-28 requests; a bridged one is opened
    /// with `client`'s capabilities and name.
    async fn open_modern(&self, sc: &SessionChild, client: &Declared) -> Result<(), NoChild> {
        let gw = self.gw();
        let timeout = Self::target(&gw, self.index).limits.upstream_timeout;
        let params = client.initialize_params();
        match sc
            .child
            .settle_era(|| gw.next_id(), Some(&params), timeout)
            .await
        {
            Ok(ServerEra::Modern(_) | ServerEra::Silent) => Ok(()),
            Ok(ServerEra::Bridged(init)) => {
                let _ = sc.bridged.set(init);
                let _ = sc.declared.set(client.capabilities_text().into());
                Ok(())
            }
            Err(why) => Err(NoChild::Failed(UpstreamError::Unreachable(why.to_string()))),
        }
    }

    async fn reap_idle(&self) {
        let idle = Self::target(&self.gw(), self.index).stdio.idle_timeout;
        let stale: Vec<String> = self
            .sessions
            .locked()
            .iter()
            .filter(|(_, sc)| sc.last_used.locked().elapsed() >= idle)
            .map(|(id, _)| id.clone())
            .collect();
        for id in stale {
            tracing::info!(session = %id, "session idle for {idle:?}: ending it");
            self.close(&id).await;
        }
    }
}
