//! The `subscriptions/listen` streams of one session toolgate holds with a server of the
//! handshake era (a bridged HTTP session, the shared stdio child, the stdio front's child),
//! which that session's announcements go to (`pipeline::subscriptions`).
//!
//! Each kind of server offers here what it hears outside any request (an HTTP session's own
//! stream, a child's stdout) and asks its server through [`OwnRequests`]; the rest is the
//! same for all. A stream's resources are subscribed to before it is acknowledged, each time
//! (the server keeps a set, so asking again costs nothing but a round trip, and each stream
//! learns what its server refused); a resource is unsubscribed from once no stream of the
//! session holds it.

use super::own::{OwnRequests, Unresulted};
use crate::locks::MutexExt;
use crate::pipeline::subscriptions::{self, Announcement, Filter, Subscription};
use bytes::Bytes;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// Streams open at once in one session; the next is refused until one ends. A bridged HTTP
/// session is every client's of one credential (all anonymous clients share one), and a
/// client keeps one stream open as long as it runs, so the bound is one of many clients.
const MAX_STREAMS: usize = 1024;
/// The resources a session's streams name, all counted (one named by two streams counts
/// twice): what clients can make a session hold (at most 2 KiB each) and ask its server.
const MAX_NAMED: usize = 4096;
/// Announcements waiting for a stream's client. One that takes none while this many wait
/// has its stream ended, as a 2026-07-28 server ends it: nothing is replayed, so the client
/// opens it again and lists again, which loses nothing a longer backlog would have kept.
const BACKLOG: usize = 64;

/// The streams of one session.
pub(crate) struct Subscribers {
    open: Mutex<Open>,
    releasing: Arc<tokio::sync::Semaphore>,
}

impl Default for Subscribers {
    fn default() -> Subscribers {
        Subscribers {
            open: Mutex::default(),
            releasing: Arc::new(tokio::sync::Semaphore::new(RELEASING)),
        }
    }
}

#[derive(Default)]
struct Open {
    /// Nothing the server announces can be heard any more (an HTTP server whose session
    /// stream is gone): a stream opened now is acknowledged with nothing.
    deaf: bool,
    streams: Vec<Stream>,
    next: u64,
    /// How many streams hold each resource.
    held: HashMap<Box<str>, usize>,
    /// The resources the streams name, all counted (the sum of `held`).
    named: usize,
}

/// A stream, kept until its client is gone ([`Subscribed`]), which releases what it holds.
struct Stream {
    n: u64,
    subscription: Arc<Subscription>,
    /// `None` once ended: its client sees it end.
    out: Option<mpsc::Sender<Bytes>>,
}

/// Why a stream could not be opened: the session holds as much as it may.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Full {
    #[error(
        "this gateway holds at most {MAX_STREAMS} subscriptions/listen streams at once in front of this server; end one or try again later"
    )]
    Streams,
    #[error(
        "the subscriptions/listen streams open in front of this server name {MAX_NAMED} resources at most between them; name fewer, end a stream or try again later"
    )]
    Resources,
}

/// How the server is told that no stream holds some resources any more: on a task of its
/// own, since a stream ends where nothing can wait (its client left). The task holds its
/// [`Releasing`] until it is done.
pub(crate) type Release = Box<dyn FnOnce(Vec<Box<str>>, Releasing) + Send>;

/// One of the few unsubscriptions a session sends at once.
pub(crate) type Releasing = tokio::sync::OwnedSemaphorePermit;

/// Unsubscriptions one session sends at once. A client that opens and drops streams faster
/// than the server takes them would otherwise have toolgate send without bound; past this,
/// a resource stays subscribed to, and what the server announces of it is dropped, since no
/// stream holds it.
const RELEASING: usize = 4;

impl Subscribers {
    /// Opens `subscription`'s stream, which takes what the server announces from now on;
    /// [`Subscribed`] acknowledges it, and closes it when dropped.
    pub(crate) fn open(
        self: &Arc<Self>,
        mut subscription: Subscription,
        release: Release,
    ) -> Result<(Subscribed, mpsc::Receiver<Bytes>), Full> {
        let mut open = self.open.locked();
        if open.streams.len() >= MAX_STREAMS {
            return Err(Full::Streams);
        }
        if open.deaf {
            subscription.filter = Filter::default();
        }
        if open.named + subscription.filter.uris.len() > MAX_NAMED {
            return Err(Full::Resources);
        }
        open.named += subscription.filter.uris.len();
        let (out, rx) = mpsc::channel(BACKLOG);
        let n = open.next;
        open.next += 1;
        for uri in &subscription.filter.uris {
            *open.held.entry(uri.clone()).or_default() += 1;
        }
        let id = subscription.id.clone();
        let subscription = Arc::new(subscription);
        open.streams.push(Stream {
            n,
            subscription,
            out: Some(out),
        });
        let subscribed = Subscribed {
            subscribers: self.clone(),
            n,
            id,
            release: Some(release),
        };
        Ok((subscribed, rx))
    }

    /// `line`, which the server sent its session outside any request: each stream whose
    /// filter holds it gets it, tagged. `false` when no stream took it.
    pub(crate) fn offer(&self, line: &[u8]) -> bool {
        let mut open = self.open.locked();
        // Most of what a server sends on its own is no announcement, and most sessions have
        // no stream: read only when one may take it.
        if open.streams.is_empty() {
            return false;
        }
        let Some(a) = Announcement::of(line) else {
            return false;
        };
        let mut taken = false;
        for s in &mut open.streams {
            let (Some(out), Some(relayed)) = (&s.out, s.subscription.relayed(&a)) else {
                continue;
            };
            taken = true;
            if out.try_send(Bytes::from(relayed)).is_err() {
                tracing::warn!(
                    "a subscriptions/listen stream's client took nothing while {BACKLOG} announcements waited; the stream is ended, and its client opens it again"
                );
                s.out = None;
            }
        }
        taken
    }

    /// Ends every stream: the session is over, and nothing more will be announced in it. Each
    /// client sees its stream end, and opens another (in a new session).
    pub(crate) fn end(&self) {
        for s in &mut self.open.locked().streams {
            s.out = None;
        }
    }

    /// Ends every stream on purpose (toolgate shuts down): each gets its result last, which
    /// tells its client the stream was closed, not lost. None opens after.
    pub(crate) fn close(&self) {
        let mut open = self.open.locked();
        open.deaf = true;
        for s in &mut open.streams {
            if let Some(out) = s.out.take() {
                let _ = out.try_send(Bytes::from(s.subscription.ended()));
            }
        }
    }

    /// Nothing more the server announces can be heard in the session (its stream is gone
    /// for good): its streams end, and one opened after is acknowledged with nothing, so
    /// that its client neither waits for what will not come nor opens streams again and
    /// again.
    pub(crate) fn deafen(&self) {
        self.open.locked().deaf = true;
        self.end();
    }

    /// Ends stream `n`: the resources no other stream holds are returned.
    fn leave(&self, n: u64) -> Vec<Box<str>> {
        let mut open = self.open.locked();
        let Some(at) = open.streams.iter().position(|s| s.n == n) else {
            return Vec::new();
        };
        let s = open.streams.swap_remove(at);
        open.unhold(&s.subscription.filter.uris)
    }

    /// Stream `n` without the resources in `refused`, and its acknowledgment; `None` when it
    /// has already ended.
    fn acknowledge(&self, n: u64, refused: &[Box<str>]) -> Option<Bytes> {
        let mut open = self.open.locked();
        let s = (open.streams.iter_mut()).find(|s| s.n == n && s.out.is_some())?;
        let narrowed = Arc::make_mut(&mut s.subscription);
        narrowed.filter.uris.retain(|u| !refused.contains(u));
        let ack = Bytes::from(narrowed.acknowledgment());
        open.unhold(refused);
        Some(ack)
    }
}

impl Open {
    /// `uris` held by one stream fewer; those no stream holds now are returned.
    fn unhold(&mut self, uris: &[Box<str>]) -> Vec<Box<str>> {
        let mut released = Vec::new();
        for uri in uris {
            if let Some(count) = self.held.get_mut(uri) {
                self.named -= 1;
                *count -= 1;
                if *count == 0 {
                    self.held.remove(uri);
                    released.push(uri.clone());
                }
            }
        }
        released
    }
}

/// A stream's place among its session's, left when dropped.
pub(crate) struct Subscribed {
    subscribers: Arc<Subscribers>,
    n: u64,
    /// Its subscription's id, for an acknowledgment of a stream ended before it.
    id: Box<serde_json::value::RawValue>,
    release: Option<Release>,
}

impl Subscribed {
    /// The stream's first message, once the server has said which of its resources it
    /// refuses: they are left out of what it is delivered. A stream whose session ended
    /// meanwhile is acknowledged with nothing, and ends.
    pub(crate) fn acknowledgment(&self, refused: &[Box<str>]) -> Bytes {
        self.subscribers
            .acknowledge(self.n, refused)
            .unwrap_or_else(|| {
                let id = self.id.clone();
                let nothing = Subscription {
                    id,
                    filter: Filter::default(),
                };
                Bytes::from(nothing.acknowledgment())
            })
    }
}

impl Drop for Subscribed {
    fn drop(&mut self) {
        let released = self.subscribers.leave(self.n);
        if released.is_empty() {
            return;
        }
        let releasing = self.subscribers.releasing.clone().try_acquire_owned();
        match (releasing, self.release.take()) {
            (Ok(releasing), Some(release)) => release(released, releasing),
            _ => tracing::debug!(
                "{RELEASING} unsubscriptions already under way in this session; the resources stay subscribed to"
            ),
        }
    }
}

/// A stream's resources asked about at once, all of them within one
/// `limits.upstream_timeout`. One at a time, a server slow to answer would hold a stream of
/// [`subscriptions::MAX_RESOURCES`] up to that many times as long before its
/// acknowledgment; all at once, one stream would send its server that many requests
/// together.
const ASKED_AT_ONCE: usize = 8;

/// Asks `server` to subscribe to each of `uris`, under ids `ids` gives; the ones it
/// refused, or had not agreed to when one of its own requests would have timed out, are
/// returned. A subscription it agrees to later is not undone: what it announces of that
/// resource no stream holds, and is dropped.
pub(crate) async fn subscribe<S: OwnRequests>(
    server: &S,
    uris: &[Box<str>],
    ids: impl Fn() -> String,
) -> Vec<Box<str>> {
    let agreed = ask_each(server, (true, ASKED_AT_ONCE), uris, ids).await;
    (uris.iter().zip(agreed))
        .filter(|(_, agreed)| !agreed)
        .map(|(uri, _)| uri.clone())
        .collect()
}

/// Asks `server` to unsubscribe from each of `uris`, one at a time (a release holds one of
/// the session's [`RELEASING`] unsubscriptions), those not asked within one timeout left
/// subscribed to.
pub(crate) async fn unsubscribe<S: OwnRequests>(
    server: &S,
    uris: Vec<Box<str>>,
    ids: impl Fn() -> String,
) {
    ask_each(server, (false, 1), &uris, ids).await;
}

/// Asks `server` about each of `uris`, `at_once` at a time, for as long as one of its own
/// requests may wait ([`OwnRequests::timeout`]): whether it agreed to each by then.
async fn ask_each<S: OwnRequests>(
    server: &S,
    (subscribe, at_once): (bool, usize),
    uris: &[Box<str>],
    ids: impl Fn() -> String,
) -> Vec<bool> {
    use futures_util::StreamExt;
    let mut agreed = vec![false; uris.len()];
    let (mut waiting, mut asked) = (
        uris.iter().enumerate(),
        futures_util::stream::FuturesUnordered::new(),
    );
    let answered = async {
        loop {
            while asked.len() < at_once
                && let Some((i, uri)) = waiting.next()
            {
                asked.push(ask_about(server, subscribe, (i, uri), ids()));
            }
            match asked.next().await {
                Some((i, yes)) => agreed[i] = yes,
                None => break,
            }
        }
    };
    if tokio::time::timeout(server.timeout(), answered)
        .await
        .is_err()
    {
        tracing::debug!(
            subscribe,
            "the server did not answer every resource subscription in time; the rest count as refused"
        );
    }
    agreed
}

/// [`ask`], for the `i`th resource asked about.
async fn ask_about<S: OwnRequests>(
    server: &S,
    subscribe: bool,
    (i, uri): (usize, &str),
    id: String,
) -> (usize, bool) {
    (i, ask(server, subscribe, uri, &id).await)
}

/// `resources/subscribe` (or `unsubscribe`) of `uri`; whether the server agreed.
async fn ask<S: OwnRequests>(server: &S, subscribe: bool, uri: &str, id: &str) -> bool {
    let request = Bytes::from(subscriptions::resource_request(subscribe, uri, id));
    match server.ask(request, id).await {
        Ok(_) => true,
        Err(Unresulted::Refused(why)) => {
            tracing::debug!(error = %why, subscribe, "the server refused a resource subscription");
            false
        }
        Err(e) => {
            tracing::debug!(error = %e, subscribe, "a resource subscription got no answer");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::value::RawValue;

    fn subscription(id: &str, tools: bool, uris: &[&str]) -> Subscription {
        Subscription {
            id: RawValue::from_string(format!("\"{id}\"")).unwrap(),
            filter: Filter {
                tools,
                uris: uris.iter().map(|u| (*u).into()).collect(),
                ..Filter::default()
            },
        }
    }

    fn released() -> (Release, Arc<Mutex<Vec<Box<str>>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let into = seen.clone();
        (Box::new(move |uris, _| into.locked().extend(uris)), seen)
    }

    const TOOLS: &[u8] = br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
    const UPDATED: &[u8] =
        br#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a://1"}}"#;

    #[test]
    fn each_stream_gets_its_acknowledgment_then_what_its_filter_holds() {
        let subs = Arc::new(Subscribers::default());
        let (r1, _) = released();
        let (r2, _) = released();
        let (sa, mut a) = subs.open(subscription("a", true, &[]), r1).unwrap();
        let (sb, mut b) = subs
            .open(subscription("b", false, &["a://1", "a://2"]), r2)
            .unwrap();
        assert!(subs.offer(TOOLS));
        assert!(subs.offer(UPDATED));
        assert!(!subs.offer(br#"{"jsonrpc":"2.0","method":"notifications/message"}"#));
        assert!(!subs.offer(br#"{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}"#));
        let text = |b: Bytes| String::from_utf8(b.to_vec()).unwrap();
        assert!(
            text(sa.acknowledgment(&[])).contains(r#""notifications":{"toolsListChanged":true}"#)
        );
        assert!(text(a.try_recv().unwrap()).contains(r#"subscriptionId":"a""#));
        assert!(a.try_recv().is_err());
        let refused = text(sb.acknowledgment(&["a://2".into()]));
        assert!(
            refused.contains(r#"{"resourceSubscriptions":["a://1"]}"#),
            "{refused}"
        );
        let update = text(b.try_recv().unwrap());
        assert!(update.contains("a://1") && update.contains(r#"subscriptionId":"b""#));
        assert!(b.try_recv().is_err());
    }

    #[test]
    fn a_resource_is_released_when_no_stream_holds_it() {
        let subs = Arc::new(Subscribers::default());
        let (r1, seen1) = released();
        let (r2, seen2) = released();
        let (first, _rx1) = subs
            .open(subscription("a", false, &["a://1", "a://2"]), r1)
            .unwrap();
        let (second, _rx2) = subs.open(subscription("b", false, &["a://1"]), r2).unwrap();
        drop(first);
        assert_eq!(*seen1.locked(), vec![Box::<str>::from("a://2")]);
        drop(second);
        assert_eq!(*seen2.locked(), vec![Box::<str>::from("a://1")]);
    }

    #[test]
    fn a_stream_whose_client_takes_nothing_is_ended_and_the_rest_go_on() {
        let subs = Arc::new(Subscribers::default());
        let (r1, _) = released();
        let (r2, _) = released();
        let (_slow, mut slow) = subs.open(subscription("slow", true, &[]), r1).unwrap();
        let (_fast, mut fast) = subs.open(subscription("fast", true, &[]), r2).unwrap();
        for _ in 0..=BACKLOG {
            subs.offer(TOOLS);
            fast.try_recv().unwrap();
        }
        let mut got = 0;
        while slow.try_recv().is_ok() {
            got += 1;
        }
        assert_eq!(got, BACKLOG, "what fit");
        assert!(slow.is_closed());
        subs.offer(TOOLS);
        assert!(fast.try_recv().is_ok());
    }

    #[test]
    fn streams_end_with_their_session() {
        let subs = Arc::new(Subscribers::default());
        let (r, seen) = released();
        let (held, mut rx) = subs.open(subscription("a", true, &["a://1"]), r).unwrap();
        subs.end();
        assert!(rx.try_recv().is_err() && rx.is_closed());
        drop(held);
        assert_eq!(
            *seen.locked(),
            [Box::<str>::from("a://1")],
            "released once its client is gone"
        );
        let (r, _) = released();
        let (_closed, mut rx) = subs.open(subscription("c", true, &[]), r).unwrap();
        subs.close();
        let last = String::from_utf8(rx.try_recv().unwrap().to_vec()).unwrap();
        assert!(last.contains(r#""id":"c","result""#), "{last}");
        assert!(rx.try_recv().is_err() && rx.is_closed());
        subs.deafen();
        let (r, _) = released();
        let (deaf, _rx) = subs.open(subscription("b", true, &["a://1"]), r).unwrap();
        let ack = String::from_utf8(deaf.acknowledgment(&[]).to_vec()).unwrap();
        assert!(ack.contains(r#""notifications":{}"#), "{ack}");
    }

    #[test]
    fn unsubscriptions_under_way_at_once_are_bounded() {
        let subs = Arc::new(Subscribers::default());
        let under_way = Arc::new(Mutex::new(Vec::new()));
        let mut told = 0;
        for i in 0..=RELEASING {
            let keep = under_way.clone();
            let release: Release = Box::new(move |_, releasing| keep.locked().push(releasing));
            let uri = format!("a://{i}");
            drop(
                subs.open(subscription("s", false, &[&uri]), release)
                    .unwrap(),
            );
            told = under_way.locked().len();
        }
        assert_eq!(told, RELEASING, "the one past the bound is not sent");
        under_way.locked().clear();
        let (r, seen) = released();
        drop(
            subs.open(subscription("s", false, &["a://again"]), r)
                .unwrap(),
        );
        assert_eq!(seen.locked().len(), 1, "sent again once one is done");
    }

    #[test]
    fn streams_past_the_bound_are_refused() {
        let subs = Arc::new(Subscribers::default());
        let mut kept = Vec::new();
        for i in 0..MAX_STREAMS {
            let (r, _) = released();
            kept.push(
                subs.open(subscription(&i.to_string(), true, &[]), r)
                    .unwrap(),
            );
        }
        let (r, _) = released();
        assert!(subs.open(subscription("over", true, &[]), r).is_err());
        kept.pop();
        let (r, _) = released();
        assert!(subs.open(subscription("again", true, &[]), r).is_ok());
    }

    #[test]
    fn a_sessions_streams_name_a_bounded_number_of_resources_between_them() {
        let subs = Arc::new(Subscribers::default());
        let uris: Vec<String> = (0..256).map(|i| format!("a://{i}")).collect();
        let uris: Vec<&str> = uris.iter().map(String::as_str).collect();
        let mut kept = Vec::new();
        for i in 0..MAX_NAMED / uris.len() {
            let (r, _) = released();
            kept.push(
                subs.open(subscription(&i.to_string(), false, &uris), r)
                    .unwrap(),
            );
        }
        let (r, _) = released();
        let over = subs.open(subscription("over", false, &["a://0"]), r);
        assert!(matches!(over, Err(Full::Resources)));
        let (r, _) = released();
        assert!(
            subs.open(subscription("none", true, &[]), r).is_ok(),
            "lists only"
        );
        let (first, _) = kept.remove(0);
        first.acknowledgment(&["a://0".into(), "a://1".into()]);
        let (r, _) = released();
        let two = subscription("two", false, &["b://0", "b://1"]);
        let two = subs.open(two, r);
        assert!(two.is_ok(), "what the server refused is not held");
        let (r, _) = released();
        let three = subs.open(subscription("three", false, &["c://0"]), r);
        assert!(matches!(three, Err(Full::Resources)));
        drop(first);
        let (r, _) = released();
        assert!(
            subs.open(subscription("after", false, &uris[2..]), r)
                .is_ok()
        );
    }

    /// A server that agrees to `a://…`, refuses `no://…` and never answers `hang://…`,
    /// counting the requests it holds at once.
    #[derive(Default)]
    struct Slow {
        held: std::sync::atomic::AtomicUsize,
        most: std::sync::atomic::AtomicUsize,
    }

    impl OwnRequests for Slow {
        async fn ask(&self, request: Bytes, _id: &str) -> Result<Box<RawValue>, Unresulted> {
            use std::sync::atomic::Ordering::SeqCst;
            let held = self.held.fetch_add(1, SeqCst) + 1;
            self.most.fetch_max(held, SeqCst);
            let text = String::from_utf8(request.to_vec()).unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            if text.contains("hang://") {
                std::future::pending::<()>().await;
            }
            self.held.fetch_sub(1, SeqCst);
            match text.contains("no://") {
                true => Err(crate::pipeline::guard::ErrorAnswer("no".into()).into()),
                false => Ok(RawValue::from_string("{}".into()).unwrap()),
            }
        }

        async fn tell(&self, _: Bytes) {}

        fn timeout(&self) -> std::time::Duration {
            std::time::Duration::from_secs(120)
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_streams_resources_are_asked_about_a_few_at_once_within_one_timeout() {
        let server = Slow::default();
        let mut uris: Vec<Box<str>> = (0..40).map(|i| format!("a://{i}").into()).collect();
        uris.push("no://1".into());
        let started = tokio::time::Instant::now();
        let refused = subscribe(&server, &uris, String::new).await;
        assert_eq!(refused, vec![Box::<str>::from("no://1")]);
        let most = server.most.load(std::sync::atomic::Ordering::SeqCst);
        assert_eq!(most, ASKED_AT_ONCE, "asked together, a few at a time");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));

        // A server that never answers some: the stream waits one timeout for them in all,
        // and they count as refused, whatever their place among the rest.
        let uris: Vec<Box<str>> = (0..256)
            .map(|i| match i % 3 {
                0 => format!("hang://{i}"),
                _ => format!("a://{i}"),
            })
            .map(Box::from)
            .collect();
        let started = tokio::time::Instant::now();
        let refused = subscribe(&server, &uris, String::new).await;
        assert_eq!(started.elapsed(), server.timeout());
        let hung: Vec<Box<str>> = uris
            .iter()
            .filter(|u| u.starts_with("hang"))
            .cloned()
            .collect();
        let answered = uris.len() - refused.len();
        assert!(hung.iter().all(|h| refused.contains(h)), "{refused:?}");
        assert!(
            answered >= ASKED_AT_ONCE,
            "those asked beside the hung ones are answered: {answered}"
        );

        // Unsubscriptions go one at a time, the release over within one timeout too.
        let server = Slow::default();
        let started = tokio::time::Instant::now();
        let uris = vec!["a://1".into(), "hang://2".into(), "a://3".into()];
        unsubscribe(&server, uris, String::new).await;
        assert_eq!(started.elapsed(), server.timeout());
        assert_eq!(server.most.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
