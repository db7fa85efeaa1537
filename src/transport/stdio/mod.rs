//! `toolgate stdio -- CMD`: a desktop client launches toolgate, toolgate launches the server.
//! Both sides speak newline-delimited JSON-RPC; the rules are the pipeline's, as over HTTP.
//!
//! stdout carries only JSON-RPC (toolgate's logs go to stderr). stdio servers stay silent on
//! malformed input, so toolgate answers malformed lines, non-JSON-RPC messages and over-long
//! lines itself. When the server exits, every pending request gets an error and toolgate exits
//! with status 1; when the client closes stdin, the server is shut down cleanly and toolgate
//! exits with status 0.

pub mod over_http;

use crate::gateway::{Gateway, Target};
use crate::jsonrpc::{self, Body as Parsed};
use crate::mcp::{self, Era};
use crate::pipeline::answer::Answer;
use crate::pipeline::bridge::{self, Reverse};
use crate::pipeline::guard;
use crate::pipeline::step::{self, Bridging, Sender, Step};
use crate::pipeline::{self, Kind, Pending, UpstreamError};
use crate::transport::upstream::child::{ChildLister, ServerEra};
use crate::transport::upstream::child::{ChildProcess, FromChild, Line, read_line};
use bytes::Bytes;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

/// How long the server gets after its stdin closes, and again after SIGTERM.
const GRACE: Duration = Duration::from_secs(2);
/// The same when toolgate itself was told to stop.
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

pub(crate) enum Out {
    Line(Vec<u8>),
    /// Flush what was written and end the process with this status.
    Exit(i32),
}

/// The client's next message line, skipping blank lines and answering over-long ones itself
/// (stdio servers would stay silent); `None` when the client is gone.
pub(crate) async fn next_message<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
    max: usize,
    out: &mpsc::UnboundedSender<Out>,
) -> Option<Bytes> {
    loop {
        match read_line(r, max).await {
            Ok(Line::Line(l)) if l.iter().all(u8::is_ascii_whitespace) => continue,
            Ok(Line::Line(l)) => return Some(Bytes::from(l)),
            Ok(Line::TooLong(id)) => {
                let msg = format!("Invalid Request: the message is over the {max}-byte limit");
                let id = id.and_then(|i| RawValue::from_string(i).ok());
                let _ = out.send(Out::Line(jsonrpc::error_response(
                    id.as_deref(),
                    jsonrpc::INVALID_REQUEST,
                    &msg,
                    None,
                )));
            }
            Ok(Line::Eof) | Err(_) => return None,
        }
    }
}

/// The one writer of stdout: lines from every task, never interleaved.
pub(crate) fn spawn_writer() -> (mpsc::UnboundedSender<Out>, tokio::task::JoinHandle<i32>) {
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

/// Runs until the client or the server goes away; returns the process exit status.
pub async fn run(gw: Arc<Gateway>, command: &[String]) -> i32 {
    let target = gw.targets[0].clone();
    let limits = gw.config.limits.clone();
    let (child, mut events) = match ChildProcess::spawn(command, limits.max_response_bytes) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("{e}");
            return 1;
        }
    };
    tracing::info!(server = %child.command(), "started the tool server");

    let (out, writer) = spawn_writer();

    // Requests forwarded to the server, by raw id, waiting for their answers.
    let pending: Arc<Mutex<HashMap<String, Pending>>> = Arc::default();
    let key = gw.scope(&target, Some(b"stdio"), None);

    let mut from_server = {
        let (gw, out, pending, key, target) = (
            gw.clone(),
            out.clone(),
            pending.clone(),
            key,
            target.clone(),
        );
        tokio::spawn(async move {
            while let Some(ev) = events.recv().await {
                match ev {
                    FromChild::Message(line) => {
                        let Ok(Parsed::Single(m)) = jsonrpc::parse(&line) else {
                            tracing::warn!(
                                "the tool server wrote a line that is not one JSON-RPC message; dropped"
                            );
                            continue;
                        };
                        let waiting = match (m.method.is_none(), m.id) {
                            (true, Some(id)) => pending
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .remove(jsonrpc::id_key(id.get()).as_ref()),
                            _ => None,
                        };
                        let replacement = match &waiting {
                            Some(p) => pipeline::observe(&gw, p, &m).replacement,
                            None if m.method.is_none() => {
                                // An answer to nothing the client is waiting for: it would
                                // skip every answer-side rule, so it goes no further.
                                tracing::warn!(
                                    "the tool server answered a request that is not pending; dropped"
                                );
                                continue;
                            }
                            None => {
                                // Notifications and server requests: learn from them, pass them on.
                                let any = Pending {
                                    id: None,
                                    kind: Kind::Other,
                                    era: Era::Legacy,
                                    key,
                                    target: target.clone(),
                                    client: None,
                                    bridged: None,
                                };
                                pipeline::observe(&gw, &any, &m).replacement
                            }
                        };
                        let line = match (&replacement, &waiting) {
                            (None, Some(p)) => bridge::complete(p, line),
                            _ => line,
                        };
                        let _ = out.send(Out::Line(
                            replacement.map_or_else(|| line.to_vec(), |a| a.body),
                        ));
                    }
                    // Logged by the main loop, which knows whether the client had asked
                    // for it (by closing stdin) or not.
                    FromChild::Exited(how) => return Some(how.to_string()),
                }
            }
            None
        })
    };

    let mut stdin = BufReader::new(tokio::io::stdin());
    let (mut server_era, mut reverse) = (None, None);
    let mut server_gone = None;
    // SIGTERM ends toolgate as stdin's end does, the server first: both official SDKs close
    // stdin, wait two seconds, then send it, and a toolgate that died at once would leave its
    // server (in a process group of its own) running.
    let mut term = Terminate::new();
    let mut terminated = false;
    loop {
        let next = tokio::select! {
            // When the server is gone, stop forwarding; what is left is answered below.
            how = &mut from_server => {
                server_gone = Some(how.ok().flatten().unwrap_or_else(|| "exited".into()));
                break;
            }
            () = term.recv() => {
                terminated = true;
                break;
            }
            m = next_message(&mut stdin, limits.max_body_bytes, &out) => m,
        };
        let Some(line) = next else { break };
        let to = Server {
            child: &child,
            timeout: limits.upstream_timeout,
            era: &mut server_era,
            reverse: &mut reverse,
        };
        if let Some(answer) = from_client(&gw, &target, &key, to, &pending, line).await {
            let _ = out.send(Out::Line(answer));
        }
    }
    if let Some(how) = server_gone {
        tracing::error!("the tool server {how} while the client was connected; toolgate stops");
        answer_unanswered(&pending, &mut stdin, limits.max_body_bytes, &out, &how).await;
        let _ = out.send(Out::Exit(1));
    } else {
        // A SIGTERM (first, or while the server takes its time) cuts the wait short.
        let grace = if terminated { SHORT_GRACE } else { GRACE };
        let how = tokio::select! {
            how = child.shutdown(grace) => how,
            () = term.recv() => {
                child.kill_group();
                "was killed: toolgate was told to stop".to_string()
            }
        };
        if terminated {
            tracing::info!("SIGTERM: the tool server {how}");
        } else {
            tracing::info!("the client closed stdin; the tool server {how}");
        }
        // What the server wrote before it exited still goes out; what it left unanswered
        // gets an error rather than silence.
        let _ = tokio::time::timeout(GRACE, &mut from_server).await;
        let why = UpstreamError::Unreachable(format!(
            "the tool server {how} before answering, after the client closed stdin"
        ));
        answer_pending(&pending, &out, &why);
        let _ = out.send(Out::Exit(0));
    }
    drop(out);
    writer.await.unwrap_or(1)
}

/// After the server died, every request gets an error instead of no answer: those it was
/// working on, and those the client sent before it could know (already in the pipe, or
/// arriving within a moment). The main loop does this once it has stopped forwarding, so a
/// request forwarded while the server was dying cannot slip past.
async fn answer_unanswered<R: tokio::io::AsyncBufRead + Unpin>(
    pending: &Mutex<HashMap<String, Pending>>,
    stdin: &mut R,
    max: usize,
    out: &mpsc::UnboundedSender<Out>,
    how: &str,
) {
    let why = UpstreamError::Unreachable(format!("the tool server {how}"));
    answer_pending(pending, out, &why);
    while let Ok(Some(line)) =
        tokio::time::timeout(Duration::from_millis(200), next_message(stdin, max, out)).await
    {
        if let Ok(Parsed::Single(m)) = jsonrpc::parse(&line)
            && m.is_request()
        {
            let is_call = m.method() == Some(mcp::TOOLS_CALL);
            let era = Era::detect(None, m.version_text());
            let _ = out.send(Out::Line(
                Answer::upstream_failed(era, m.id, is_call, &why).body,
            ));
        }
    }
}

/// Every request still waiting gets an error answer.
fn answer_pending(
    pending: &Mutex<HashMap<String, Pending>>,
    out: &mpsc::UnboundedSender<Out>,
    why: &UpstreamError,
) {
    let orphans: Vec<Pending> = pending
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .drain()
        .map(|(_, p)| p)
        .collect();
    for p in orphans {
        let is_call = matches!(p.kind, Kind::Call { .. });
        let _ = out.send(Out::Line(
            Answer::upstream_failed(p.era, p.id.as_deref(), is_call, why).body,
        ));
    }
}

/// The server behind the pipe, as a client's line reaches it.
struct Server<'a> {
    child: &'a ChildProcess,
    timeout: Duration,
    /// What it speaks to a 2026-07-28 client, asked on the first such request.
    era: &'a mut Option<ServerEra>,
    /// Set when it refused a handshake-era client's `initialize` and answered
    /// `server/discover`: that client is bridged to it (`bridge::Reverse`).
    reverse: &'a mut Option<Reverse>,
}

impl Server<'_> {
    /// The server's `initialize` result when a 2026-07-28 client is bridged to it.
    async fn bridged(&mut self, gw: &Gateway) -> Option<&RawValue> {
        if self.era.is_none() {
            *self.era = match self.child.settle_era(|| gw.next_id(), self.timeout).await {
                Ok(era) => Some(era),
                Err(why) => {
                    // Its own answers will tell the client what is wrong; asked again later.
                    tracing::warn!(error = %why, "could not learn the tool server's era; 2026-07-28 requests go to it as they are");
                    None
                }
            };
        }
        match self.era.as_ref() {
            Some(ServerEra::Bridged(init)) => Some(init),
            _ => None,
        }
    }

    /// A handshake-era client's `initialize`, waited for here: when the server refuses it
    /// and answers `server/discover`, it speaks only 2026-07-28, and toolgate answers the
    /// client from that and bridges it.
    async fn initialize(&mut self, gw: &Gateway, m: &jsonrpc::Message<'_>, line: Bytes) -> Vec<u8> {
        let id = m.id.expect("a request has an id");
        let answer = match self.child.request(line, id.get(), self.timeout).await {
            Ok(a) => a,
            Err(e) => return Answer::upstream_failed(Era::Legacy, Some(id), false, &e).body,
        };
        let ids = || gw.next_id();
        match self
            .child
            .reverse_if_refused(ids, self.timeout, id, m.raw_params(), &answer)
            .await
        {
            Some((ours, reverse)) => {
                *self.reverse = Some(reverse);
                ours
            }
            None => answer.to_vec(),
        }
    }
}

/// Handles one line from the client: forwards it, or returns toolgate's own answer.
async fn from_client(
    gw: &Gateway,
    target: &Arc<Target>,
    key: &crate::catalog::ScopeKey,
    mut to: Server<'_>,
    pending: &Mutex<HashMap<String, Pending>>,
    line: Bytes,
) -> Option<Vec<u8>> {
    let child = to.child;
    let mut m = match jsonrpc::parse(&line) {
        Ok(Parsed::Single(m)) => m,
        Ok(Parsed::Batch(msgs)) => {
            let why = step::batch(&msgs, false).err()?;
            return Some(jsonrpc::error_response(
                None,
                jsonrpc::INVALID_REQUEST,
                why,
                None,
            ));
        }
        Err(rejection) => {
            return Some(jsonrpc::error_response(
                None,
                rejection.code(),
                &rejection.message(),
                None,
            ));
        }
    };
    if guard::refuse_call_notification(gw, target, &m).is_some() {
        // A notification gets no answer on stdio; it is counted and goes no further.
        return None;
    }
    let era = Era::detect(None, m.version_text());
    let client = gw.client(None);
    if era == Era::Legacy && m.is_request() && m.method() == Some("initialize") {
        return Some(to.initialize(gw, &m, line.clone()).await);
    }
    let init = match era == Era::Modern && m.is_request() {
        true => to.bridged(gw).await.map(ToOwned::to_owned),
        false => None,
    };
    let reverse = to.reverse.as_ref().filter(|_| era == Era::Legacy);
    let bridging = Bridging::of(init.as_deref(), reverse);
    let lister = ChildLister {
        child,
        timeout: to.timeout,
        bridging,
    };
    let sender = Sender {
        target,
        key: *key,
        era,
        client,
    };
    let (body, p) = match step::decide(gw, sender, &mut m, &line, bridging, &lister).await {
        Step::Forward { body, pending } => (body, pending),
        Step::Answer(a) => return Some(a.body),
        Step::Relay(never) => match never {},
        Step::Consumed => return None,
    };
    let id =
        p.id.as_deref()
            .map(|id| jsonrpc::id_key(id.get()).into_owned());
    if let Some(id) = &id {
        pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id.clone(), p);
    }
    if let Err(e) = child.send(body) {
        let p = id.and_then(|id| {
            pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id)
        })?;
        let is_call = matches!(p.kind, Kind::Call { .. });
        return Some(Answer::upstream_failed(p.era, p.id.as_deref(), is_call, &e).body);
    }
    None
}
