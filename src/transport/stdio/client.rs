//! The client's side of the pipe: its lines in, bounded, and every line back out through one
//! writer, answers read against their requests on the way. What waits for the client to read
//! it is bounded too: past [`MAX_UNREAD`] bytes, the front reads nothing more that would add
//! to it ([`ToClient::paced`]), so a server that writes faster than the client reads is held
//! back by its pipe, as the client's own pipe would hold it back.

use crate::catalog::ScopeKey;
use crate::error::UpstreamError;
use crate::gateway::Gateway;
use crate::jsonrpc::{self, Body as Parsed};
use crate::lograte::{LogRate, warn_at_rate};
use crate::pipeline::{self, Pending};
use crate::transport::upstream::child::{Line, Uncounted, read_line};
use crate::transport::upstream::subscribers::Subscribers;
use bytes::Bytes;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::io::AsyncWriteExt;
use tokio::sync::{Notify, mpsc};
use tokio::task::{AbortHandle, JoinHandle};

/// What the writer of stdout is given.
pub(super) enum Out {
    Line(Bytes),
    /// Flush what was written and end the process with this status.
    Exit(i32),
}

/// The client's next message line, skipping blank lines and answering over-long ones itself
/// (stdio servers would stay silent); `None` when the client is gone.
pub(super) async fn next_message<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
    max: usize,
    to: &ToClient,
) -> Option<Bytes> {
    loop {
        match read_line(r, max, &mut Uncounted).await {
            Ok(Line::Whole(l)) => {
                // A console's encoding may open the input with a byte order mark.
                let line = crate::text::without_bom(Bytes::from(l));
                if !line.iter().all(u8::is_ascii_whitespace) {
                    return Some(line);
                }
            }
            Ok(Line::TooLong(id)) => {
                let msg = format!("Invalid Request: the message is over the {max}-byte limit");
                let id = id.and_then(|i| RawValue::from_string(i).ok());
                to.write(jsonrpc::error_response(
                    id.as_deref(),
                    jsonrpc::INVALID_REQUEST,
                    &msg,
                    None,
                ));
            }
            Ok(Line::Eof) | Err(_) => return None,
        }
    }
}

/// Bytes a client may leave unread before the front stops reading what would add to them:
/// room for many answers of the usual size, and a bound on what a client that stops reading
/// (a suspended desktop app, a stalled pipe) makes toolgate hold.
const MAX_UNREAD: usize = 4 << 20;

/// What waits for the client's pipe, counted in bytes.
#[derive(Default)]
pub(super) struct Unread {
    bytes: AtomicUsize,
    /// The writer has ended: nothing will be taken again, and nothing need wait.
    closed: AtomicBool,
    /// Told when the count falls to half of [`MAX_UNREAD`] (a reader held back then reads
    /// a run of lines, not one per line written), and when the writer ends.
    taken: Notify,
}

impl Unread {
    fn add(&self, n: usize) {
        self.bytes.fetch_add(n, Ordering::AcqRel);
    }

    fn taken(&self, n: usize) {
        let before = self.bytes.fetch_sub(n, Ordering::AcqRel);
        if before > MAX_UNREAD / 2 && before - n <= MAX_UNREAD / 2 {
            self.taken.notify_waiters();
        }
    }

    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.taken.notify_waiters();
    }

    fn has_room(&self) -> bool {
        self.closed.load(Ordering::Acquire) || self.bytes.load(Ordering::Acquire) <= MAX_UNREAD
    }

    async fn room(&self) {
        loop {
            let taken = self.taken.notified();
            tokio::pin!(taken);
            // Listening before looking: a fall between the look and the wait is heard.
            taken.as_mut().enable();
            if self.has_room() {
                return;
            }
            taken.await;
        }
    }
}

/// The one writer of stdout: lines from every task, never interleaved.
fn spawn_writer(unread: Arc<Unread>) -> (mpsc::UnboundedSender<Out>, tokio::task::JoinHandle<i32>) {
    let (out, mut out_rx) = mpsc::unbounded_channel::<Out>();
    let writer = tokio::spawn(async move {
        let status = write_lines(&mut out_rx, &unread).await;
        unread.close();
        status
    });
    (out, writer)
}

/// Writes each line as it comes; the exit status once told to end, or 0 when stdout closes.
async fn write_lines(lines: &mut mpsc::UnboundedReceiver<Out>, unread: &Unread) -> i32 {
    let mut stdout = tokio::io::stdout();
    while let Some(o) = lines.recv().await {
        match o {
            Out::Line(l) => {
                let l = crate::text::one_line(l);
                if stdout.write_all(&l).await.is_err()
                    || stdout.write_all(b"\n").await.is_err()
                    || stdout.flush().await.is_err()
                {
                    return 0;
                }
                unread.taken(l.len());
            }
            Out::Exit(code) => {
                let _ = stdout.flush().await;
                return code;
            }
        }
    }
    0
}

/// The client's requests still owed an answer, by id (`jsonrpc::id_key`), each with the task
/// that answers it. A request is owed until its answer is handed to the writer, not until its
/// task ends: the client may reuse an id as soon as it has read the answer, which can be
/// before the task that wrote it has been polled to its end.
#[derive(Default)]
pub(super) struct Owed(Mutex<HashMap<String, AbortHandle>>);

impl Owed {
    fn ids(&self) -> std::sync::MutexGuard<'_, HashMap<String, AbortHandle>> {
        // Nothing is left half-done under the lock: a panic elsewhere leaves the map whole.
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts the task that answers request `id` and owes it: under the lock, so that the task
    /// cannot answer before it is owed.
    pub(super) fn start(&self, id: Option<String>, spawn: impl FnOnce() -> AbortHandle) {
        let mut ids = self.ids();
        ids.retain(|_, task| !task.is_finished());
        let task = spawn();
        if let Some(id) = id {
            ids.insert(id, task);
        }
    }

    /// Whether request `id` is still owed its answer. A task that ended without writing one
    /// (every path writes one; this is the backstop) owes nothing.
    pub(super) fn holds(&self, id: &str) -> bool {
        self.ids().get(id).is_some_and(|t| !t.is_finished())
    }

    /// The client cancelled request `id`: it reads no answer to it, so its exchange ends
    /// here, unanswered. An answer the server sends all the same is not passed on.
    pub(super) fn withdraw(&self, id: &str) {
        let task = self.ids().remove(id);
        if let Some(task) = task {
            task.abort();
        }
    }

    /// Request `id` is no longer owed: its answer is being written.
    fn paid(&self, id: Option<&RawValue>) {
        if let Some(id) = id {
            self.ids().remove(&*jsonrpc::id_key(id.get()));
        }
    }
}

/// Everything that goes back to the stdio client: toolgate's own answers, the server's
/// answers read against their requests, and what the server sends on its own.
#[derive(Clone)]
pub(crate) struct ToClient {
    pub(super) gw: Arc<Gateway>,
    pub(super) out: mpsc::UnboundedSender<Out>,
    pub(super) unread: Arc<Unread>,
    pub(super) owed: Arc<Owed>,
    /// The spans of the requests waiting for their answers.
    pub(super) traces: Arc<super::traces::Traces>,
}

impl ToClient {
    /// The client's side, and the writer task that ends with toolgate's exit status.
    pub(crate) fn open(gw: Arc<Gateway>) -> (ToClient, JoinHandle<i32>) {
        let unread = Arc::<Unread>::default();
        let (out, writer) = spawn_writer(unread.clone());
        let traces = Arc::default();
        let to = ToClient {
            gw,
            out,
            unread,
            owed: Arc::default(),
            traces,
        };
        (to, writer)
    }

    pub(crate) fn write(&self, line: impl Into<Bytes>) {
        let line = line.into();
        self.unread.add(line.len());
        let _ = self.out.send(Out::Line(line));
    }

    /// Resolves once the client has read enough of what it was sent to be sent more (at most
    /// [`MAX_UNREAD`] bytes waiting): whatever reads on the client's behalf awaits it before
    /// reading on.
    pub(crate) async fn paced(&self) {
        self.unread.room().await;
    }

    /// Ends the span of `pending` once its answer is written.
    fn answered(&self, pending: &Pending, outcome: &str) {
        // Without an exporter nothing waits in `traces`: no lock per answer.
        if self.gw.telemetry.is_none() {
            return;
        }
        if let Some(id) = pending.id.as_deref() {
            self.traces.end(id.get(), outcome, &pending.target.name);
        }
    }

    /// The answer to request `id` (or to nothing, for a notification's refusal): the request
    /// is no longer owed once the writer has it.
    pub(super) fn write_owed(&self, id: Option<&RawValue>, body: impl Into<Bytes>) {
        self.owed.paid(id);
        self.write(body);
    }

    /// The answer to `pending`, written as it is (toolgate's own, an input-required round, a
    /// refusal, or one the rules have read already), traced as `outcome`.
    pub(crate) fn write_answer(&self, pending: &Pending, body: impl Into<Bytes>, outcome: &str) {
        self.write_owed(pending.id.as_deref(), body);
        self.answered(pending, outcome);
    }

    /// No answer came to `pending`, for this reason (`pipeline::unanswered`).
    pub(crate) fn failed(&self, pending: &Pending, why: &UpstreamError) {
        match pipeline::unanswered(&self.gw, pending, why) {
            Some(a) => self.write_owed(pending.id.as_deref(), a.body),
            None => self.owed.paid(pending.id.as_deref()),
        }
        self.answered(pending, why.outcome());
    }

    /// A request read from the client but never sent gets an error; anything else, nothing.
    pub(super) fn refuse(&self, line: &[u8], why: &UpstreamError) {
        if let Ok(Parsed::Single(m)) = jsonrpc::parse(line)
            && let era = crate::mcp::Era::detect(None, || m.names_version())
            && let Some(a) = pipeline::undecided(&self.gw, &self.gw.targets[0], era, &m, why)
        {
            self.write_owed(m.id.filter(|_| m.is_request()), a.body);
        }
    }

    /// What the server sent on its own (a notification, a request to the client): learned
    /// from and passed on, on the client's `subscriptions/listen` streams when one takes it
    /// (`subscribers`, a bridged child's), as it came otherwise. An answer here answers
    /// nothing the client waits for, and would skip every answer-side rule, so it goes no
    /// further.
    pub(crate) fn unsolicited(
        &self,
        key: ScopeKey,
        line: Bytes,
        subscribers: Option<&Subscribers>,
    ) {
        let Ok(Parsed::Single(m)) = jsonrpc::parse(&line) else {
            // The server's mistake, which may come with every message it sends.
            static SAID: LogRate = LogRate::new();
            warn_at_rate!(
                SAID,
                "not_a_message",
                {},
                "the tool server sent something that is not one JSON-RPC message; dropped"
            );
            return;
        };
        if m.method.is_none() {
            tracing::info!(
                "the tool server answered a request nothing waits for (withdrawn, timed out, or unknown); dropped"
            );
            return;
        }
        pipeline::observe_unsolicited(&self.gw, &key, &m);
        if !subscribers.is_some_and(|s| s.offer(&line)) {
            self.write(line);
        }
    }
}
