//! A stdio MCP server as a child process: newline-delimited JSON-RPC on its stdin and
//! stdout, its stderr turned into log lines.
//!
//! Messages toolgate waits for (requests' answers, by id) are handed to their waiter, and an
//! answer nothing waits for any more is dropped; every other message the child writes goes
//! to the transport's handler, called on the reader in the order the child wrote: what the
//! child sent about a request (its progress) is handed over before that request's answer
//! is. When the child exits, every waiter fails and the handler gets
//! [`FromChild::Exited`], so nothing waits forever. Shutdown closes stdin, then sends
//! SIGTERM to the child's process group, then SIGKILL, each after a grace period: `npx` and
//! `uvx` servers run as grandchildren.
//!
//! A session with a server of the HTTP+SSE transport is a child too ([`ChildSource`]): its
//! event stream stands in for the process and its pipes (`event_stream`).

use super::group_keeper::Group;
use super::input::{Input, Lines, Refused};
use super::launch;
use super::owing::{Claimed, Owing};
use super::own::{self, OwnRequests, Unresulted};
use super::rounds::{Listening, Offered, Questions, Rounds};
use crate::error::UpstreamError;
use crate::jsonrpc::{self, Body as Parsed};
use crate::locks::MutexExt;
use crate::lograte::{LogRate, warn_at_rate};
use crate::pipeline::asked::Retries;
use crate::pipeline::bridge;
use crate::pipeline::guard::{self, ListFailed, Lister};
use crate::pipeline::step::Bridging;
use crate::policy::held::{ByteBudget, Held};
use bytes::Bytes;
use nix::sys::signal::Signal;
use serde_json::value::RawValue;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::oneshot;

/// The answer to a request its client cancelled (the code LSP gave it; outside JSON-RPC's
/// reserved range).
const REQUEST_CANCELLED: i64 = -32800;

/// The answers the child owes, by id; `None` once its output has ended.
type Waiters = Option<Owing<oneshot::Sender<Given>>>;

/// What a request waiting on the child is given: the child's answer, or toolgate's
/// `-32800` in its place when its client cancelled it (which its hop tells apart).
pub(crate) enum Given {
    /// With its share of the answers held for clients (`limits.max_request_bytes_in_flight`),
    /// to be kept until its client has it ([`Held::keeping`]).
    Answer(Bytes, Share),
    Cancelled(Bytes),
}

/// An answer's share of the bytes held for clients' requests ([`crate::gateway::Gateway::answer_bytes`]).
pub(crate) type Share = Held<Arc<ByteBudget>>;

impl Given {
    /// The answer, its share given back: for what toolgate reads itself.
    pub(crate) fn into_bytes(self) -> Bytes {
        self.into_parts().0
    }

    /// The answer, and the share its client's answer is to keep.
    pub(crate) fn into_parts(self) -> (Bytes, Option<Share>) {
        match self {
            Given::Answer(b, share) => (b, Some(share)),
            Given::Cancelled(b) => (b, None),
        }
    }

    /// The same, its bytes rewritten (put under another id).
    pub(crate) fn map(self, f: impl FnOnce(Bytes) -> Bytes) -> Given {
        match self {
            Given::Answer(b, share) => Given::Answer(f(b), share),
            Given::Cancelled(b) => Given::Cancelled(f(b)),
        }
    }
}

/// What the requests waiting on a child know of its output.
#[derive(Default)]
struct Output {
    /// How the child ended, once its output has: what a request still waiting is told.
    ended: OnceLock<String>,
    /// The reader waits for room among the answers held for clients: a request that
    /// times out meanwhile was kept from its answer by the gateway, not by the server alone.
    waits_for_room: AtomicBool,
    /// It has written a message: it started (`upstream::restarts`).
    spoken: AtomicBool,
}

/// A line's share, grown as the line is read: past the budget, the reader waits, and the
/// child's output with it, in its pipe (as an HTTP server's answer waits in its socket).
/// One piece of a line at most is read past the budget for each child.
struct Counting<'a> {
    share: Share,
    output: &'a Output,
}

/// What the bytes of a line are counted in as they are read ([`read_line`]).
pub(crate) trait Counts: Send {
    /// Counts `bytes` more, once there is room for them.
    fn count(&mut self, bytes: usize) -> impl Future<Output = ()> + Send;
    /// Forgets what was counted: the line was dropped.
    fn forget(&mut self);
}

/// Lines whose bytes nothing counts: a child's stderr, a client's requests.
pub(crate) struct Uncounted;

impl Counts for Uncounted {
    fn count(&mut self, _: usize) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }

    fn forget(&mut self) {}
}

impl Counting<'_> {
    fn new<'a>(answers: &Arc<ByteBudget>, output: &'a Output) -> Counting<'a> {
        Counting {
            share: ByteBudget::empty(answers),
            output,
        }
    }
}

impl Counts for Counting<'_> {
    async fn count(&mut self, bytes: usize) {
        if self.share.try_grow(bytes) {
            return;
        }
        self.output.waits_for_room.store(true, Ordering::Relaxed);
        self.share.grow(bytes).await;
        self.output.waits_for_room.store(false, Ordering::Relaxed);
    }

    fn forget(&mut self) {
        self.share.shrink_to(0);
    }
}

pub enum FromChild {
    /// One message the child wrote that is no answer (a request or a notification), and no
    /// bridged call's question.
    Message(Bytes),
    /// The child is gone; says how.
    Exited(String),
}

/// What a child's reader hands what no waiter claims to, on the reader: it must not block.
/// A closure of [`FromChild`] is one.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, ev: FromChild);

    /// Resolves when the reader may read the child's next line. A handler that passes lines
    /// on to a reader slower than the child (a client that stops reading its pipe) makes the
    /// child wait here, as that reader's own pipe would, instead of holding its lines.
    fn ready(&self) -> impl Future<Output = ()> + Send {
        std::future::ready(())
    }
}

impl<F: Fn(FromChild) + Send + Sync + 'static> Handler for F {
    fn handle(&self, ev: FromChild) {
        self(ev);
    }
}

pub struct ChildProcess {
    to_child: Mutex<Option<Input>>,
    waiters: Arc<Mutex<Waiters>>,
    output: Arc<Output>,
    process: tokio::sync::Mutex<Option<tokio::process::Child>>,
    pid: Option<u32>,
    /// The process's group, which toolgate's signals go to.
    group: Option<Group>,
    /// In place of a process, an HTTP+SSE server's session ([`ChildProcess::connect`]).
    stream: Option<super::event_stream::Running>,
    /// The program's file name: how logs name the child. Never its arguments, which may
    /// carry a secret (a database URL with its password, a token flag). An HTTP+SSE
    /// server's host and port.
    program: String,
    /// The bridged calls waiting on it that its questions go to, and the rounds those
    /// questions started (`child_questions`).
    pub(crate) questions: Arc<Questions>,
    pub(crate) rounds: Rounds<Waiting>,
}

/// What a child is: a stdio server toolgate starts, or a session with a server of the
/// HTTP+SSE transport, which is served as one (`event_stream`).
#[derive(Clone)]
pub enum ChildSource {
    Command(Vec<String>),
    EventStream(Arc<super::event_stream::EventStreamServer>),
}

impl ChildSource {
    /// The children of `target`: its command, or sessions with it when it is an HTTP server
    /// of the HTTP+SSE transport (`None` for a Streamable HTTP server, which has none).
    pub(crate) fn of(target: &crate::gateway::Target) -> Result<Option<ChildSource>, String> {
        use crate::config::UpstreamTransport;
        if !target.command.is_empty() {
            return Ok(Some(ChildSource::Command(target.command.clone())));
        }
        if target.transport == UpstreamTransport::StreamableHttp {
            return Ok(None);
        }
        let uri = crate::config::parse_upstream_url(&target.url).map_err(|e| e.0)?;
        let server = super::event_stream::EventStreamServer::new(uri, &target.tls)
            .map_err(|e| format!("upstream {}: {e}", target.name))?;
        Ok(Some(ChildSource::EventStream(Arc::new(server))))
    }

    /// A new child of `target`'s, by the gateway `gw`'s configuration, its answers counted
    /// with every other server's, as [`ChildProcess::spawn`] starts one or
    /// [`ChildProcess::connect`] opens one; the session of an HTTP+SSE server goes with the
    /// credential of the client that opens it (`client`'s headers), if one does.
    pub fn start(
        &self,
        (gw, target, client): (
            &crate::gateway::Gateway,
            &crate::gateway::Target,
            Option<&http::HeaderMap>,
        ),
        handler: impl Handler,
    ) -> std::io::Result<Arc<ChildProcess>> {
        let (cfg, answers) = (&gw.config, &gw.answer_bytes);
        match self {
            ChildSource::Command(command) => {
                ChildProcess::spawn(command, (cfg, &target.upstream_env, answers), handler)
            }
            ChildSource::EventStream(server) => {
                let terms = super::event_stream::Terms {
                    credentials: crate::auth::carried(client, target.credential.as_ref()),
                    limits: target.limits.clone(),
                };
                let max_line = cfg.limits.max_response_bytes;
                Ok(ChildProcess::connect(
                    server,
                    terms,
                    (max_line, answers),
                    handler,
                ))
            }
        }
    }
}

/// A bridged call waiting on a child (`child_questions`): for its answer, and for the
/// questions the child asks meanwhile.
pub(crate) struct Waiting {
    pub(crate) owed: Owed,
    pub(crate) listening: Listening,
}

/// The answer a request written by [`ChildProcess::start`] is owed. Dropped unanswered (its
/// client cancelled it, or stopped waiting), the request is given up on: an answer that comes
/// later goes to no one ([`Owing`]).
pub struct Owed {
    key: String,
    rx: oneshot::Receiver<Given>,
    waiters: Arc<Mutex<Waiters>>,
    output: Arc<Output>,
}

/// A child as an input-required round's retry reaches it (`pipeline::asked`).
pub struct ChildRetrying {
    child: Arc<ChildProcess>,
    timeout: Duration,
}

impl Retries for ChildRetrying {
    async fn retry(&self, request: Bytes, id: &str) -> Result<Bytes, UpstreamError> {
        let id = serde_json::to_string(id).expect("a string");
        self.child.request(request, &id, self.timeout).await
    }
}

impl Owed {
    pub async fn answer(mut self, timeout: Duration) -> Result<Bytes, UpstreamError> {
        self.next(timeout).await.map(Given::into_bytes)
    }

    /// [`Owed::answer`], telling a cancelled request's answer apart.
    pub(crate) async fn given(mut self, timeout: Duration) -> Result<Given, UpstreamError> {
        self.next(timeout).await
    }

    /// [`Owed::given`], leaving the wait in place when this future is dropped first.
    pub(crate) async fn next(&mut self, timeout: Duration) -> Result<Given, UpstreamError> {
        match tokio::time::timeout(timeout, &mut self.rx).await {
            Ok(Ok(given)) => Ok(given),
            // Only when the child's output ended: every waiter goes then.
            Ok(Err(_)) => Err(ended_before_answering(self.output.ended.get())),
            Err(_) if self.output.waits_for_room.load(Ordering::Relaxed) => {
                Err(UpstreamError::no_room(timeout))
            }
            Err(_) => Err(UpstreamError::Timeout(timeout)),
        }
    }
}

/// What a request the child will never answer is told: how it ended, once known.
fn ended_before_answering(how: Option<&String>) -> UpstreamError {
    let how = how.map_or("exited", String::as_str);
    UpstreamError::Unreachable(format!("the tool server {how} before answering"))
}

impl Drop for Owed {
    fn drop(&mut self) {
        // Still empty: the waiter under the key is this one (answered, or replaced by a
        // request with the same id, it would be closed).
        if !matches!(self.rx.try_recv(), Err(oneshot::error::TryRecvError::Empty)) {
            return;
        }
        if let Some(w) = self.waiters.locked().as_mut() {
            w.give_up(&self.key);
        }
    }
}

/// One line from a reader, bounded.
pub enum Line {
    Whole(Vec<u8>),
    /// Longer than the limit; the rest of it was skipped. Carries the message's top-level
    /// `id` (raw JSON) when it has one, so that what it answers, or asks, still gets an answer.
    TooLong(Option<String>),
    Eof,
}

/// Reads up to the next newline without holding more than `max` bytes of it, each piece
/// counted in `counts` before it is kept.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    max: usize,
    counts: &mut impl Counts,
) -> std::io::Result<Line> {
    let mut buf = Vec::new();
    // Only once the line is over the limit: normal lines pay nothing for it.
    let mut too_long: Option<IdScanner> = None;
    loop {
        let available = r.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (too_long, buf.is_empty()) {
                (Some(scan), _) => Line::TooLong(scan.found()),
                (None, true) => Line::Eof,
                (None, false) => Line::Whole(buf),
            });
        }
        let (chunk, end) = match memchr::memchr(b'\n', available) {
            Some(i) => (&available[..i], Some(i + 1)),
            None => (available, None),
        };
        match &mut too_long {
            Some(scan) => scan.push(chunk),
            None => {
                let need = buf.len() + chunk.len();
                if need > buf.capacity() {
                    // Grown as a `Vec` grows, but to a size that does not depend on how the
                    // pipe split the line, and counted before it is taken: what a line
                    // holds is its buffer, up to twice its length.
                    let to = need.next_power_of_two().min(max + 1).max(need);
                    counts.count(to - buf.capacity()).await;
                    buf.reserve_exact(to - buf.len());
                }
                buf.extend_from_slice(chunk);
                if buf.len() > max {
                    let mut scan = IdScanner::default();
                    scan.push(&buf);
                    too_long = Some(scan);
                    buf = Vec::new();
                    counts.forget();
                }
            }
        }
        let used = end.unwrap_or(chunk.len());
        r.consume(used);
        if end.is_some() {
            if let Some(scan) = too_long {
                return Ok(Line::TooLong(scan.found()));
            }
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(Line::Whole(buf));
        }
    }
}

/// Finds the top-level `"id"` of a JSON object read in pieces, in bounded memory: the id of a
/// line too long to keep. Strings, escapes and nesting are followed, so an `"id"` inside a
/// result or inside a string is never taken for the message's.
#[derive(Default)]
pub struct IdScanner {
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At the top level, the next string is a member name.
    expect_key: bool,
    /// The member name read so far, while it can still be `id`.
    key: Vec<u8>,
    key_is_id: bool,
    value: Option<Vec<u8>>,
    found: Option<String>,
    gave_up: bool,
}

/// The longest id kept; a longer one is not worth answering by.
const MAX_ID_BYTES: usize = 256;

impl IdScanner {
    pub fn push(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if self.found.is_some() || self.gave_up {
                return;
            }
            let top = self.depth == 1 && !self.in_string;
            if let Some(v) = &mut self.value {
                if top && (b == b',' || b == b'}') {
                    self.found = std::str::from_utf8(v.trim_ascii()).ok().map(str::to_owned);
                    return;
                }
                if v.len() >= MAX_ID_BYTES {
                    self.gave_up = true;
                    return;
                }
                v.push(b);
            }
            if self.in_string {
                let naming = self.depth == 1 && self.expect_key;
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                    if naming {
                        self.key_is_id = self.key == b"id";
                        self.expect_key = false;
                    }
                    continue;
                }
                if naming && self.key.len() <= 2 {
                    self.key.push(b);
                }
                continue;
            }
            match b {
                b'"' => {
                    self.in_string = true;
                    self.key.clear();
                }
                b'{' | b'[' => {
                    self.depth += 1;
                    if self.depth == 1 {
                        self.expect_key = b == b'{';
                    }
                }
                b'}' | b']' => self.depth = self.depth.saturating_sub(1),
                b':' if top && self.key_is_id && self.value.is_none() => {
                    self.value = Some(Vec::new());
                }
                b',' if top => {
                    self.expect_key = true;
                    self.key_is_id = false;
                }
                _ => {}
            }
        }
    }

    pub fn found(self) -> Option<String> {
        self.found
    }
}

/// An error answer to the message with id `id` (raw JSON) that could not be read whole.
pub fn over_limit_error(id: &str, max: usize, whose: &str) -> Option<Vec<u8>> {
    let id = serde_json::value::RawValue::from_string(id.to_owned()).ok()?;
    let msg = format!("{whose} is over the {max}-byte line limit");
    Some(jsonrpc::error_response(
        Some(&id),
        jsonrpc::INTERNAL_ERROR,
        &msg,
        None,
    ))
}

/// The id of a response, as its raw JSON text (`None` for anything else).
fn response_id(line: &[u8]) -> Option<String> {
    match jsonrpc::parse(line) {
        Ok(Parsed::Single(m)) if m.method.is_none() => {
            m.id.map(|i| jsonrpc::id_key(i.get()).into_owned())
        }
        _ => None,
    }
}

/// Writes each message to the child's stdin as one line, in order, until the child stops
/// reading or toolgate lets it go: dropping stdin closes it, the child's signal to finish.
async fn write_lines(mut stdin: tokio::process::ChildStdin, mut lines: Lines) {
    while let Some(line) = lines.recv().await {
        let line = crate::text::one_line(line);
        let ok = stdin.write_all(&line).await.is_ok()
            && stdin.write_all(b"\n").await.is_ok()
            && stdin.flush().await.is_ok();
        if !ok {
            break;
        }
    }
}

/// The child's stderr, line by line, into toolgate's log, named by its program and process
/// id (one child per session: the id tells them apart).
async fn log_stderr(stderr: tokio::process::ChildStderr, program: String, pid: Option<u32>) {
    let mut r = BufReader::new(stderr);
    while let Ok(line) = read_line(&mut r, 16 * 1024, &mut Uncounted).await {
        match line {
            Line::Whole(l) => {
                tracing::info!(target: "toolgate::upstream", server = %program, pid, "{}", String::from_utf8_lossy(&l))
            }
            Line::TooLong(_) => {
                tracing::info!(target: "toolgate::upstream", server = %program, pid, "(a stderr line over 16 KiB, not shown)")
            }
            Line::Eof => break,
        }
    }
}

fn is_message(line: &[u8]) -> bool {
    matches!(jsonrpc::parse(line), Ok(Parsed::Single(_)))
}

/// The child's answer `line` under `id` to whoever waits for it, with its `share`. One no
/// request waits for goes to no stream: a client would read it as a second answer, or an
/// answer to nothing it asked.
fn hand_over(waiters: &Mutex<Waiters>, id: &str, line: Bytes, share: Share) {
    let claimed = waiters.locked().as_mut().map(|w| w.claim(id));
    match claimed {
        Some(Claimed::Waiting(w)) => {
            let _ = w.send(Given::Answer(line, share));
        }
        Some(Claimed::GivenUp) => tracing::debug!(
            "the tool server answered a request given up on (timed out, cancelled, or its client gone); dropped"
        ),
        _ => tracing::info!(
            "the tool server answered a request nothing waits for (unknown, or given up on long ago); dropped"
        ),
    }
}

/// Whether `line` is progress of a request given up on ([`Owing`]), which goes to no one.
fn is_stale(waiters: &Mutex<Waiters>, line: &[u8]) -> bool {
    let waiters = waiters.locked();
    let Some(w) = waiters.as_ref().filter(|w| w.has_stale()) else {
        return false;
    };
    crate::mcp::progress_of(line).is_some_and(|t| w.is_stale(&jsonrpc::id_key(t.get())))
}

/// A message of the child's that answers no request: progress of a request given up on is
/// dropped, a question for a bridged call waiting goes to that call, the rest to `handler`.
fn pass_on(
    line: Bytes,
    (waiters, questions): (&Mutex<Waiters>, &Questions),
    child: &std::sync::Weak<ChildProcess>,
    handler: &impl Handler,
) {
    if is_stale(waiters, &line) {
        return tracing::debug!(
            "the tool server said how a request given up on progresses; dropped"
        );
    }
    match questions.offer(&line) {
        Offered::Taken => {}
        Offered::Left => handler.handle(FromChild::Message(line)),
        Offered::Ambiguous(refusal) => {
            if let Some(child) = child.upgrade() {
                let _ = child.send(Bytes::from(refusal));
            }
        }
    }
}

/// What a child's reader shares with the child, and how it reads.
struct Reader {
    waiters: Arc<Mutex<Waiters>>,
    output: Arc<Output>,
    questions: Arc<Questions>,
    /// Where the answers it hands to waiters are counted.
    answers: Arc<ByteBudget>,
    max_line: usize,
    /// What the log says of output that is no message ([`ChildProcess::not_a_message`]).
    not_a_message: &'static str,
}

/// The child's stdout: each answer goes to whoever waits for it, or to no one
/// ([`hand_over`]), every other message to `handler` (or to the bridged call it asks); at
/// its end, the waiters are let go and `handler` is told how the child ended.
async fn read_stdout(
    stdout: impl tokio::io::AsyncRead + Unpin,
    reader: Reader,
    child: std::sync::Weak<ChildProcess>,
    handler: impl Handler,
) {
    let Reader {
        waiters,
        output,
        questions,
        answers,
        max_line,
        not_a_message,
    } = reader;
    let mut r = BufReader::new(stdout);
    let deliver = |id: Option<String>, line: Bytes, share: Share| {
        if !output.spoken.load(Ordering::Relaxed) {
            output.spoken.store(true, Ordering::Relaxed);
        }
        match id {
            Some(id) => hand_over(&waiters, &id, line, share),
            // A message that is no answer goes without its share: what `handler` holds is
            // bounded apart.
            None => pass_on(line, (&waiters, &questions), &child, &handler),
        }
    };
    // What the child writes that no client gets as it came, said at this rate for each
    // child: the mistake is the server's, and may come with every call. Its text is never
    // logged: it may hold anything.
    let said = LogRate::new();
    loop {
        handler.ready().await;
        let mut counting = Counting::new(&answers, &output);
        match read_line(&mut r, max_line, &mut counting).await {
            Ok(Line::Whole(l)) => {
                // A console's encoding may open the output with a byte order mark.
                let line = crate::text::without_bom(Bytes::from(l));
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match response_id(&line) {
                    Some(id) => deliver(Some(id), line, counting.share),
                    None if is_message(&line) => deliver(None, line, counting.share),
                    // A banner or a log line on stdout: no client could read it as a message.
                    None => warn_at_rate!(said, "not_a_message", { bytes = line.len(), },
                        not_a_message),
                }
            }
            // Answered all the same, as an error in the answer's place: whoever waits for
            // that id gets it, as a line the child could have written.
            Ok(Line::TooLong(Some(id))) => {
                warn_at_rate!(
                    said,
                    "answer_over",
                    {},
                    format_args!(
                        "the tool server wrote a line over {max_line} bytes; it is answered as an error"
                    )
                );
                if let Some(e) = over_limit_error(&id, max_line, "the tool server's answer") {
                    let id = jsonrpc::id_key(&id).into_owned();
                    deliver(Some(id), Bytes::from(e), counting.share);
                }
            }
            Ok(Line::TooLong(None)) => warn_at_rate!(
                said,
                "line_over",
                {},
                format_args!(
                    "the tool server wrote a line over {max_line} bytes without an id; dropped"
                )
            ),
            Ok(Line::Eof) | Err(_) => break,
        }
    }
    // Closed, not just emptied: a request that comes after this is refused at once instead
    // of waiting for an answer nothing will read. The requests still waiting are let go once
    // the exit is known, so they can say how the child ended.
    let orphans = waiters.locked().take();
    let how = match child.upgrade() {
        Some(me) => me.exit_status().await,
        None => "stopped".into(),
    };
    let _ = output.ended.set(how.clone());
    drop(orphans);
    handler.handle(FromChild::Exited(how));
}

impl ChildProcess {
    /// Starts `command` (program and arguments) in its own process group, with the
    /// environment less what `cfg` withholds from a server whose own variables are
    /// `own_env` ([`crate::config::Config::withheld_from_servers`]), its lines bounded by
    /// `limits.max_response_bytes`, the answers it hands to requests counted in `answers`.
    /// `handler` gets what no waiter claims, on the reader: it must not block.
    pub fn spawn(
        command: &[String],
        (cfg, own_env, answers): (&crate::config::Config, &[String], &Arc<ByteBudget>),
        handler: impl Handler,
    ) -> std::io::Result<Arc<ChildProcess>> {
        let max_line = cfg.limits.max_response_bytes;
        let (program, args) = command
            .split_first()
            .ok_or_else(|| std::io::Error::other("no command to run"))?;
        let cannot = |e| std::io::Error::other(format!("cannot start {program:?}: {e}"));
        let mut cmd = launch::command(program).map_err(cannot)?;
        let group = Group::new();
        cmd.args(args)
            .process_group(group.to_join())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for name in cfg.withheld_from_servers(own_env) {
            cmd.env_remove(name);
        }
        let mut child = cmd.spawn().map_err(cannot)?;
        let pid = child.id();
        let group = group.led_by(pid);
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");
        let label = std::path::Path::new(program)
            .file_name()
            .map_or_else(|| program.clone(), |n| n.to_string_lossy().into_owned());

        let (to_child, lines) = super::input::input();
        tokio::spawn(write_lines(stdin, lines));
        tokio::spawn(log_stderr(stderr, label.clone(), pid));
        let me = ChildProcess::new(to_child, Some((child, group)), None, label);
        Ok(me.reading(stdout, (max_line, answers), handler))
    }

    /// A session with a server of the HTTP+SSE transport, served as a child is: its event
    /// stream is the child's output, each message posted is a line written to it
    /// (`event_stream`). Opened at once; a stream that cannot be opened ends the "child"
    /// with the reason, as a process that exits at once does.
    pub(crate) fn connect(
        server: &Arc<super::event_stream::EventStreamServer>,
        terms: super::event_stream::Terms,
        bounds: (usize, &Arc<ByteBudget>),
        handler: impl Handler,
    ) -> Arc<ChildProcess> {
        let stream = server.open(terms);
        let running = Some(stream.running);
        let me = ChildProcess::new(stream.to_server, None, running, server.label());
        me.reading(stream.output, bounds, handler)
    }

    fn new(
        to_child: Input,
        process: Option<(tokio::process::Child, Group)>,
        stream: Option<super::event_stream::Running>,
        program: String,
    ) -> ChildProcess {
        let (process, group) = process.unzip();
        ChildProcess {
            pid: process.as_ref().and_then(tokio::process::Child::id),
            group,
            to_child: Mutex::new(Some(to_child)),
            waiters: Arc::new(Mutex::new(Some(Owing::default()))),
            output: Arc::default(),
            process: tokio::sync::Mutex::new(process),
            stream,
            program,
            questions: Arc::default(),
            rounds: Rounds::default(),
        }
    }

    /// The child, its `output` read by a task of its own, each line bounded by `max_line`,
    /// the answers counted in `answers`.
    fn reading(
        self,
        output: impl tokio::io::AsyncRead + Unpin + Send + 'static,
        (max_line, answers): (usize, &Arc<ByteBudget>),
        handler: impl Handler,
    ) -> Arc<ChildProcess> {
        let me = Arc::new(self);
        let reader = Reader {
            waiters: me.waiters.clone(),
            output: me.output.clone(),
            questions: me.questions.clone(),
            answers: answers.clone(),
            max_line,
            not_a_message: me.not_a_message(),
        };
        let child = Arc::downgrade(&me);
        tokio::spawn(read_stdout(output, reader, child, handler));
        me
    }

    /// Where a hop to it goes, for its span.
    pub(crate) fn hop_to(&self) -> crate::telemetry::hop::HopTo<'_> {
        match &self.stream {
            Some(stream) => crate::telemetry::hop::HopTo::EventStream(stream.uri()),
            None => crate::telemetry::hop::HopTo::Child,
        }
    }

    /// What the log says of its start.
    pub fn started(&self) -> &'static str {
        match self.stream {
            Some(_) => "opened a session with the tool server (HTTP+SSE)",
            None => "started the tool server",
        }
    }

    /// Whether it has written a message: a process that ends before is one that could not
    /// start.
    pub(crate) fn spoken(&self) -> bool {
        self.output.spoken.load(Ordering::Relaxed)
    }

    /// What the log says of what it sends that no client could read as a message: a banner
    /// or a log line on a process's stdout, an event of a stream whose data is none.
    fn not_a_message(&self) -> &'static str {
        match self.stream {
            Some(_) => {
                "the tool server sent an event whose data is not a JSON-RPC message; dropped"
            }
            None => {
                "the tool server wrote a line on stdout that is not a JSON-RPC message; dropped (stdout carries only messages, a server's own output belongs on stderr)"
            }
        }
    }

    /// How logs name it: its program, with [`Self::pid`].
    pub fn program(&self) -> &str {
        &self.program
    }

    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// How the child ended, once its output has. A child that exits closes its output as it
    /// goes, and its status follows within moments; one that closed its output and runs on
    /// can never answer again, so the requests in flight are not held for its exit: its owner
    /// stops it once told (`FromChild::Exited`).
    async fn exit_status(&self) -> String {
        if let Some(stream) = &self.stream {
            return stream
                .ended()
                .cloned()
                .unwrap_or_else(|| "was let go".into());
        }
        let mut p = self.process.lock().await;
        match p.as_mut() {
            Some(c) => match tokio::time::timeout(EXIT_AFTER_OUTPUT, c.wait()).await {
                Ok(Ok(s)) => {
                    self.end_group();
                    format!("exited with {s}")
                }
                _ => "closed its output".into(),
            },
            None => "stopped".into(),
        }
    }

    /// Writes one message (a line) to the child.
    pub fn send(&self, line: Bytes) -> Result<(), UpstreamError> {
        let to = self.to_child.locked();
        match to.as_ref().map(|t| t.send(line)) {
            Some(Ok(())) => Ok(()),
            Some(Err(Refused::Full(waiting))) => Err(UpstreamError::Unreachable(format!(
                "the tool server is not reading what it is sent ({} MiB wait for it)",
                waiting >> 20
            ))),
            _ => Err(self.gone()),
        }
    }

    /// Why a request cannot reach the child: it has exited, and how, once that is known
    /// (an event stream's end is known before its way in closes). Said as a request sent
    /// just before is told, since which of the two a request is can be a matter of moments.
    fn gone(&self) -> UpstreamError {
        let how =
            (self.output.ended.get()).or_else(|| self.stream.as_ref().and_then(|s| s.ended()));
        ended_before_answering(how)
    }

    /// Sends a request with id `id` (raw JSON text) and waits for the answer to it.
    pub async fn request(
        &self,
        line: Bytes,
        id: &str,
        timeout: Duration,
    ) -> Result<Bytes, UpstreamError> {
        self.start(line, id)?.answer(timeout).await
    }

    /// A round's retry, as [`Retries`] sends it.
    pub fn retrying(self: &Arc<Self>, timeout: Duration) -> ChildRetrying {
        ChildRetrying {
            child: self.clone(),
            timeout,
        }
    }

    /// Writes a request with id `id` (raw JSON text) now and returns the answer it is owed.
    /// Writing and waiting are apart so that a caller can write requests in its client's
    /// order and wait for their answers concurrently.
    pub fn start(&self, line: Bytes, id: &str) -> Result<Owed, UpstreamError> {
        let token = crate::mcp::progress_token(&line);
        self.start_as(line, id, token.as_deref().map(RawValue::get))
    }

    /// [`Self::start`] for a caller that has read the progress token `line` carries (its raw
    /// JSON text), if any: what the child says under it goes to no one once the request is given
    /// up on ([`Owing`]).
    pub(crate) fn start_as(
        &self,
        line: Bytes,
        id: &str,
        token: Option<&str>,
    ) -> Result<Owed, UpstreamError> {
        let key = jsonrpc::id_key(id).into_owned();
        let token = token.map(|t| jsonrpc::id_key(t).into_owned());
        let (tx, rx) = oneshot::channel();
        let waits = match self.waiters.locked().as_mut() {
            Some(w) => w.wait(key.clone(), tx, token),
            None => return Err(self.gone()),
        };
        // The fronts refuse a second request under an id the child still owes an answer to
        // ([`Self::owes`]); were one to come, it must not take the first one's answer.
        if !waits {
            return Err(UpstreamError::Unreachable(
                "a request with this id is already waiting for the tool server's answer".into(),
            ));
        }
        if let Err(e) = self.send(line) {
            self.forget(id);
            return Err(e);
        }
        Ok(Owed {
            key,
            rx,
            waiters: self.waiters.clone(),
            output: self.output.clone(),
        })
    }

    /// Whether the child still owes an answer under `id` (raw JSON): to a request waiting for
    /// it, or to one given up on whose answer has not come.
    pub fn owes(&self, id: &str) -> bool {
        let key = jsonrpc::id_key(id);
        self.waiters
            .locked()
            .as_ref()
            .is_some_and(|w| w.owes(key.as_ref()))
    }

    /// Whether the child's output has ended: it will answer nothing more, even if its
    /// exit has not been reaped yet.
    pub fn has_ended(&self) -> bool {
        self.waiters.locked().is_none()
    }

    /// The client cancelled request `id` (raw JSON): whoever waits for its answer gets a
    /// `-32800 Request cancelled` now instead of waiting for an answer the server need not
    /// send. `false` when nothing waited for it.
    pub fn cancel(&self, id: &str) -> bool {
        let waiter = self
            .waiters
            .locked()
            .as_mut()
            .and_then(|w| w.give_up(jsonrpc::id_key(id).as_ref()));
        let Some(waiter) = waiter else { return false };
        let Ok(raw) = serde_json::value::RawValue::from_string(id.to_owned()) else {
            return false;
        };
        let answer =
            jsonrpc::error_response(Some(&raw), REQUEST_CANCELLED, "Request cancelled", None);
        let _ = waiter.send(Given::Cancelled(Bytes::from(answer)));
        true
    }

    fn forget(&self, id: &str) {
        if let Some(w) = self.waiters.locked().as_mut() {
            w.forget(jsonrpc::id_key(id).as_ref());
        }
    }

    /// Kills the child's process group at once (SIGKILL): the last resort when toolgate must
    /// end now and a shutdown in progress would take too long.
    pub fn kill_group(&self) {
        if let Some(stream) = &self.stream {
            stream.abort();
        }
        self.signal_group(Signal::SIGKILL);
    }

    fn signal_group(&self, signal: Signal) {
        if let Some(group) = &self.group {
            group.signal(signal);
        }
    }

    /// Once the server has exited: what it left running in its group goes too.
    fn end_group(&self) {
        if let Some(group) = &self.group {
            group.end();
        }
    }

    /// Whether toolgate is stopping it ([`Self::shutdown`]): an exit then is no fault.
    pub(crate) fn stopping(&self) -> bool {
        self.to_child.locked().is_none()
    }

    /// Stops the child: closes its stdin and waits, then SIGTERMs its process group and
    /// waits, then SIGKILLs it; what it left running in its group goes too. Returns how it
    /// ended.
    pub async fn shutdown(&self, grace: Duration) -> String {
        self.to_child.locked().take();
        if let Some(stream) = &self.stream {
            stream.close(grace).await;
            return "was let go: its event stream is closed".into();
        }
        let mut guard = self.process.lock().await;
        let Some(child) = guard.as_mut() else {
            return "was already stopped".into();
        };
        let how = self.stop(child, grace).await;
        self.end_group();
        how
    }

    /// [`Self::shutdown`] up to the server's exit.
    async fn stop(&self, child: &mut tokio::process::Child, grace: Duration) -> String {
        if let Ok(Ok(s)) = tokio::time::timeout(grace, child.wait()).await {
            return format!("exited with {s} after its stdin closed");
        }
        self.signal_group(Signal::SIGTERM);
        if let Ok(Ok(s)) = tokio::time::timeout(grace, child.wait()).await {
            return format!("exited with {s} after SIGTERM");
        }
        self.signal_group(Signal::SIGKILL);
        let _ = child.kill().await;
        "was killed with SIGKILL after ignoring SIGTERM".into()
    }
}

/// How long a child whose output ended has to show its exit status.
const EXIT_AFTER_OUTPUT: Duration = Duration::from_millis(500);

/// How long a server has to answer `server/discover`; a server that drops requests it does
/// not know would otherwise hold the first 2026-07-28 request for the whole upstream timeout.
const ERA_QUESTION_TIMEOUT: Duration = Duration::from_secs(10);

/// What a stdio server speaks to a 2026-07-28 client.
pub enum ServerEra {
    /// It answered `server/discover` (with this result): its 2026-07-28 requests go to it as
    /// they are.
    Modern(Box<RawValue>),
    /// It did not answer `server/discover` in time (a server that drops requests it does not
    /// know): its requests go to it as they are, and it is not asked again.
    Silent,
    /// It refused `server/discover` and was opened with the handshake instead: its
    /// 2026-07-28 clients are served through `pipeline::bridge`. Its `initialize` result.
    Bridged(Box<RawValue>),
}

/// Why a request of toolgate's own to a child (its handshake, the era question) got no result.
#[derive(Debug, thiserror::Error)]
pub enum OwnRequestFailed {
    #[error("initializing the tool server: {0}")]
    Initialize(Unresulted),
    #[error("asking the tool server for its era: {0}")]
    Discover(Unresulted),
}

/// A stdio child as toolgate's own requests see it, each request given its timeout.
pub(crate) struct Within<'a>(pub(crate) &'a ChildProcess, pub(crate) Duration);

impl OwnRequests for Within<'_> {
    async fn ask(&self, request: Bytes, id: &str) -> Result<Box<RawValue>, Unresulted> {
        let raw_id = serde_json::to_string(id).expect("a string serializes");
        let answer = self.0.request(request, &raw_id, self.1).await?;
        Ok(guard::match_answer(&answer, id).ok_or(Unresulted::NotAnswer)??)
    }

    async fn tell(&self, notification: Bytes) {
        let _ = self.0.send(notification);
    }

    fn timeout(&self) -> Duration {
        self.1
    }
}

impl ChildProcess {
    /// Opens the server with the handshake (2025-11-25); returns its `initialize` result.
    pub async fn initialize(
        &self,
        id: &str,
        timeout: Duration,
    ) -> Result<Box<RawValue>, OwnRequestFailed> {
        own::handshake(&Within(self, timeout), id, None)
            .await
            .map_err(OwnRequestFailed::Initialize)
    }

    /// Asks the server `server/discover` before any client's request reaches it (a dual-era
    /// server takes its era from the first request it reads, so a client's malformed first
    /// request could fix it in the wrong one). A server that answers with an error speaks
    /// only the handshake: it is opened with `initialize`, and bridged. `ids` mints toolgate's
    /// request ids.
    pub async fn settle_era(
        &self,
        ids: impl Fn() -> String,
        client: Option<&RawValue>,
        timeout: Duration,
    ) -> Result<ServerEra, OwnRequestFailed> {
        let id = ids();
        let asked = Within(self, timeout.min(ERA_QUESTION_TIMEOUT));
        match own::discover(&asked, &id).await {
            Ok(discovered) => Ok(ServerEra::Modern(discovered)),
            Err(Unresulted::Refused(why)) => {
                tracing::info!(answer = %why, "the tool server does not speak 2026-07-28; bridging its clients over the 2025-11-25 handshake");
                let init = own::handshake(&Within(self, timeout), &ids(), client)
                    .await
                    .map_err(OwnRequestFailed::Initialize)?;
                Ok(ServerEra::Bridged(init))
            }
            Err(Unresulted::Unavailable(UpstreamError::Timeout(t))) => {
                tracing::info!(
                    "the tool server did not answer server/discover within {t:?}; requests go to it as they are"
                );
                Ok(ServerEra::Silent)
            }
            Err(e) => Err(OwnRequestFailed::Discover(e)),
        }
    }
}

impl ChildProcess {
    /// After a handshake-era client's `initialize` (id `id`, params `params`) got `answer`:
    /// when the server refused it and answers `server/discover`, it speaks only 2026-07-28.
    /// Then toolgate answers the client from the discover result, and the client is bridged
    /// with the returned [`bridge::Reverse`]; otherwise `None`, and `answer` stands.
    pub async fn reverse_if_refused(
        &self,
        ids: impl Fn() -> String,
        timeout: Duration,
        id: &RawValue,
        params: Option<&RawValue>,
        answer: &[u8],
    ) -> Option<(Vec<u8>, bridge::Reverse)> {
        let refused = matches!(jsonrpc::parse(answer), Ok(Parsed::Single(a)) if a.error.is_some());
        if !refused {
            return None;
        }
        let Ok(ServerEra::Modern(discovered)) = self.settle_era(ids, None, timeout).await else {
            return None;
        };
        tracing::info!("the tool server speaks only 2026-07-28; bridging its handshake-era client");
        let result = bridge::Reverse::initialize_result(&discovered, params);
        Some((
            jsonrpc::result_response(id, &result),
            bridge::Reverse::new(params),
        ))
    }
}

/// toolgate's own `tools/list`, written to the child with an id of its own.
pub(crate) struct ChildLister<'a> {
    pub(crate) child: &'a ChildProcess,
    pub(crate) timeout: Duration,
    /// How the client's messages reach the server: the listing is written the same way
    /// (without the 2026-07-28 envelope for a handshake-only server, with the envelope a
    /// handshake-era client stands for in front of a 2026-07-28-only one).
    pub(crate) bridging: Bridging<'a>,
}

impl Lister for ChildLister<'_> {
    type Relay = std::convert::Infallible;

    async fn list(
        &self,
        request: Bytes,
        id: &str,
    ) -> Result<Box<RawValue>, ListFailed<Self::Relay>> {
        let raw_id = serde_json::to_string(id).expect("a string serializes");
        let request = match self.bridging {
            Bridging::Direct => request,
            Bridging::ToHandshake(_) => bridge::strip_envelope(request),
            Bridging::ToModern(reverse) => reverse.with_envelope(request),
        };
        let answer = self
            .child
            .request(request, &raw_id, self.timeout)
            .await
            .map_err(ListFailed::Unavailable)?;
        match guard::match_answer(&answer, id) {
            Some(Ok(r)) => Ok(r),
            Some(Err(m)) => Err(ListFailed::Refused(m.0)),
            None => Err(ListFailed::Refused(
                "the answer is not a JSON-RPC response to the listing".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_id_of_an_overlong_line_is_found_wherever_it_stands() {
        let scan = |parts: &[&str]| {
            let mut s = IdScanner::default();
            for p in parts {
                s.push(p.as_bytes());
            }
            s.found()
        };
        assert_eq!(
            scan(&[r#"{"jsonrpc":"2.0","id":7,"result":{"x":"#, "\"y\"}}"]).as_deref(),
            Some("7")
        );
        assert_eq!(
            scan(&[
                r#"{"result":{"id":1,"t":"\"id\":2"},"jsonrpc":"2.0","id""#,
                r#":"a\"b"}"#
            ])
            .as_deref(),
            Some(r#""a\"b""#)
        );
        assert_eq!(scan(&[r#"{"result":[{"id":3}],"jsonrpc":"2.0"}"#]), None);
        assert_eq!(
            scan(&[r#"{"ids":1,"i":2,"id" : 9 }"#]).as_deref(),
            Some("9")
        );
        let long = format!(r#"{{"id":"{}"}}"#, "x".repeat(1000));
        assert_eq!(scan(&[&long]), None);
    }
    use super::*;

    #[tokio::test]
    async fn lines_are_bounded() {
        let data = b"short\r\nthis one is far too long\nok\nno-newline".to_vec();
        let mut r = BufReader::with_capacity(4, &data[..]);
        let mut got = Vec::new();
        loop {
            match read_line(&mut r, 10, &mut Uncounted).await.unwrap() {
                Line::Whole(l) => got.push(String::from_utf8(l).unwrap()),
                Line::TooLong(_) => got.push("<too long>".into()),
                Line::Eof => break,
            }
        }
        assert_eq!(got, ["short", "<too long>", "ok", "no-newline"]);
    }

    #[tokio::test]
    async fn a_line_is_counted_as_its_buffer_grows_and_forgotten_when_too_long() {
        let budget = Arc::new(ByteBudget::new(1 << 20));
        let output = Output::default();
        let data = format!("{}\n{}\nok\n", "a".repeat(5_000), "b".repeat(70_000));
        // Split as a pipe may split it: a line comes in pieces.
        let mut r = BufReader::with_capacity(1_000, data.as_bytes());
        let read = || Counting::new(&budget, &output);
        let mut first = read();
        let Line::Whole(l) = read_line(&mut r, 65_536, &mut first).await.unwrap() else {
            panic!("a whole line")
        };
        assert_eq!((l.len(), l.capacity()), (5_000, 8_192));
        assert_eq!(budget.held(), 8_192, "the buffer is counted, not the line");
        let mut second = read();
        let over = read_line(&mut r, 65_536, &mut second).await.unwrap();
        assert!(matches!(over, Line::TooLong(None)));
        assert_eq!(budget.held(), 8_192, "nothing kept of a line too long");
        drop((first, l));
        assert_eq!(budget.held(), 0);
        assert!(matches!(
            read_line(&mut r, 65_536, &mut read()).await.unwrap(),
            Line::Whole(l) if l == b"ok"
        ));
    }

    #[tokio::test]
    async fn a_request_after_the_output_ended_is_refused_at_once() {
        // A server that reads nothing and exits: its output ends before toolgate has reaped
        // it. A request sent in that window must not wait for the whole upstream timeout.
        let cmd = ["sh".to_string(), "-c".to_string(), "exit 3".to_string()];
        let (tx, rx) = oneshot::channel();
        let tx = Mutex::new(Some(tx));
        let mut cfg = crate::config::Config::default();
        cfg.limits.max_response_bytes = 1024;
        let answers = Arc::new(ByteBudget::new(1 << 20));
        let child = ChildProcess::spawn(&cmd, (&cfg, &[], &answers), move |ev| {
            if let (FromChild::Exited(_), Some(tx)) = (ev, tx.lock().unwrap().take()) {
                let _ = tx.send(());
            }
        })
        .unwrap();
        rx.await.unwrap();
        assert!(child.has_ended());
        let answer = tokio::time::timeout(
            Duration::from_secs(20),
            child.request(Bytes::from_static(b"{}"), "1", Duration::from_secs(600)),
        )
        .await
        .expect("an answer, not the upstream timeout");
        assert!(
            matches!(answer, Err(UpstreamError::Unreachable(ref m)) if m == "the tool server exited with exit status: 3 before answering"),
            "{answer:?}"
        );
    }
}
