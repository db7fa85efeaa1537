//! The client's side of the pipe: its lines in, bounded, and every line back out through one
//! writer, answers read against their requests on the way.

use crate::catalog::ScopeKey;
use crate::error::UpstreamError;
use crate::gateway::Gateway;
use crate::jsonrpc::{self, Body as Parsed};
use crate::lograte::{LogRate, warn_at_rate};
use crate::pipeline::{self, Pending};
use crate::transport::upstream::child::{Line, read_line};
use bytes::Bytes;
use serde_json::value::RawValue;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

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
    out: &mpsc::UnboundedSender<Out>,
) -> Option<Bytes> {
    loop {
        match read_line(r, max).await {
            Ok(Line::Whole(l)) if l.iter().all(u8::is_ascii_whitespace) => continue,
            Ok(Line::Whole(l)) => return Some(Bytes::from(l)),
            Ok(Line::TooLong(id)) => {
                let msg = format!("Invalid Request: the message is over the {max}-byte limit");
                let id = id.and_then(|i| RawValue::from_string(i).ok());
                let _ = out.send(Out::Line(
                    jsonrpc::error_response(id.as_deref(), jsonrpc::INVALID_REQUEST, &msg, None)
                        .into(),
                ));
            }
            Ok(Line::Eof) | Err(_) => return None,
        }
    }
}

/// The one writer of stdout: lines from every task, never interleaved.
fn spawn_writer() -> (mpsc::UnboundedSender<Out>, tokio::task::JoinHandle<i32>) {
    let (out, mut out_rx) = mpsc::unbounded_channel::<Out>();
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(o) = out_rx.recv().await {
            match o {
                Out::Line(l) => {
                    if stdout.write_all(&l).await.is_err()
                        || stdout.write_all(b"\n").await.is_err()
                        || stdout.flush().await.is_err()
                    {
                        return 0;
                    }
                }
                Out::Exit(code) => {
                    let _ = stdout.flush().await;
                    return code;
                }
            }
        }
        0
    });
    (out, writer)
}

/// Everything that goes back to the stdio client: toolgate's own answers, the server's
/// answers read against their requests, and what the server sends on its own.
#[derive(Clone)]
pub(crate) struct ToClient {
    pub(super) gw: Arc<Gateway>,
    pub(super) out: mpsc::UnboundedSender<Out>,
    /// The spans of the requests waiting for their answers.
    pub(super) traces: Arc<super::traces::Traces>,
}

impl ToClient {
    /// The client's side, and the writer task that ends with toolgate's exit status.
    pub(crate) fn open(gw: Arc<Gateway>) -> (ToClient, JoinHandle<i32>) {
        let (out, writer) = spawn_writer();
        let traces = Arc::default();
        (ToClient { gw, out, traces }, writer)
    }

    pub(crate) fn write(&self, line: impl Into<Bytes>) {
        let _ = self.out.send(Out::Line(line.into()));
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

    /// The answer to `pending`, written as it is (toolgate's own, an input-required round, a
    /// refusal, or one the rules have read already), traced as `outcome`.
    pub(crate) fn write_answer(&self, pending: &Pending, body: impl Into<Bytes>, outcome: &str) {
        self.write(body);
        self.answered(pending, outcome);
    }

    /// No answer came to `pending`, for this reason (`pipeline::unanswered`).
    pub(crate) fn failed(&self, pending: &Pending, why: &UpstreamError) {
        if let Some(a) = pipeline::unanswered(&self.gw, pending, why) {
            self.write(a.body);
        }
        self.answered(pending, "upstream_error");
    }

    /// A request read from the client but never sent gets an error; anything else, nothing.
    pub(super) fn refuse(&self, line: &[u8], why: &UpstreamError) {
        if let Ok(Parsed::Single(m)) = jsonrpc::parse(line)
            && let era = crate::mcp::Era::detect(None, m.version_text())
            && let Some(a) = pipeline::undecided(&self.gw, &self.gw.targets[0], era, &m, why)
        {
            self.write(a.body);
        }
    }

    /// What the server sent on its own (a notification, a request to the client): learned
    /// from and passed on. An answer here answers nothing the client waits for, and would
    /// skip every answer-side rule, so it goes no further.
    pub(crate) fn unsolicited(&self, key: ScopeKey, line: Bytes) {
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
        self.write(line);
    }
}
