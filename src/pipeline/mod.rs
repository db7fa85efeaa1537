//! The rules, independent of any transport.
//!
//! Every transport turns its traffic into single JSON-RPC messages and hands each to
//! [`engine`], the one driver, with its way to the server:
//! - [`step`] decides each message on its way up, the same in every mode: [`guard`] for a
//!   `tools/call` (docs/contract.md §1), then [`bridge`] between eras;
//! - [`observe`] looks at each message coming back: [`learn`] takes schemas from
//!   `tools/list` answers and drops catalogs on `list_changed`, [`canon`] rewrites upstream
//!   errors into the shapes the spec asks for (docs/contract.md §3);
//! - [`settle`] makes of it what the client is sent: the rules' replacement, or the answer
//!   completed for the client's era ([`bridge::complete`]).
//!
//! A message that gets no usable answer is answered, counted and logged in one place too:
//! [`unanswered`] for a forwarded request, [`undecided`] for one whose server could not take
//! it before it was decided; [`crate::error::FailureLog`] keeps a server that is down from
//! flooding the log.

pub mod answer;
pub(crate) mod asked;
pub mod bridge;
pub mod canon;
pub(crate) mod carried;
pub mod engine;
pub mod guard;
pub mod learn;
pub mod step;
pub mod subscriptions;

use crate::catalog::ScopeKey;
use crate::error::UpstreamError;
use crate::gateway::{Gateway, Target};
use crate::jsonrpc::{self, Body as Parsed, Message};
use crate::mcp::{self, Era};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::sync::Arc;

/// What kind of request is waiting for an answer, with what the rules need to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// `outcome`: what the guard made of it (`forwarded`, `coerced`, `audited`), for traces.
    /// `retry`: it carried a `requestState` (2026-07-28, SEP-2322), so a `-32602` answer is
    /// the server refusing that state, a protocol error the client must see as such.
    /// `output`: its answer's output is checked (`validation.output`, and the tool declares
    /// an `outputSchema`), so its answer is read whatever it looks like.
    /// `task`: it asked for a task (SEP-1686), so what fails of it is answered as a JSON-RPC
    /// error, never as a tool result ([`answer::Requested`]).
    Call {
        tool: Box<str>,
        outcome: &'static str,
        retry: bool,
        output: bool,
        task: bool,
    },
    List {
        first_page: bool,
    },
    Read {
        uri: Option<Box<str>>,
    },
    /// `tasks/result` (SEP-1686): its answer is the result of the call that started the task,
    /// held to that call's rules when the task's tool is known ([`crate::tasks`]).
    TaskResult {
        task: Box<str>,
    },
    /// A 2026-07-28 client's `subscriptions/listen`, bridged to a server of the handshake
    /// era: not sent as it came, but served by its way from toolgate's session with the
    /// server (`subscriptions`).
    Subscription(Box<subscriptions::Subscription>),
    Other,
}

impl Kind {
    /// For a call, what the guard made of it (`forwarded`, `coerced`, `audited`).
    pub fn call_outcome(&self) -> Option<&'static str> {
        match self {
            Kind::Call { outcome, .. } => Some(outcome),
            _ => None,
        }
    }
}

/// A forwarded request, as the rules need to see its answer.
#[derive(Clone)]
pub struct Pending {
    /// The request's id; `None` for notifications, responses and bodiless HTTP methods.
    pub id: Option<Box<RawValue>>,
    pub kind: Kind,
    pub era: Era,
    pub key: ScopeKey,
    pub target: Arc<Target>,
    /// Whose request it is, for per-client listings.
    pub client: Option<crate::policy::clients::Client>,
    /// Served over the handshake era for a 2026-07-28 client: what its answer must gain
    /// ([`bridge::answer`]).
    pub bridged: Option<bridge::Completion>,
}

impl Pending {
    /// What the answer must gain before its client reads it: a bridged request's, the
    /// 2026-07-28 members its server does not know; a 2026-07-28 `tools/call`'s, the
    /// `resultType` its server left out.
    pub fn completion(&self) -> Option<bridge::Completion> {
        self.bridged.or(match (self.era, &self.kind) {
            (Era::Modern, Kind::Call { .. }) => Some(bridge::Completion::Native),
            _ => None,
        })
    }
}

/// No usable answer came for `pending`, for reason `e`: a request gets toolgate's answer in
/// its era ([`answer::Answer::upstream_failed`]), and a call is counted as an upstream error;
/// a notification or a client's answer gets none. Every front classifies a forwarded
/// request's failure here: an answer that is not JSON-RPC or broke off, a stream that ended
/// early, a timeout, a lost bridged session, and the requests in flight when a run ends.
pub fn unanswered(gw: &Gateway, pending: &Pending, e: &UpstreamError) -> Option<answer::Answer> {
    let id = pending.id.as_deref()?;
    let requested = match &pending.kind {
        Kind::Call { tool, task, .. } => {
            (pending.target.series).tool_call(&gw.metrics, tool, e.outcome());
            answer::Requested::call(*task)
        }
        _ => answer::Requested::Other,
    };
    Some(failed(
        gw,
        &pending.target,
        pending.era,
        Some(id),
        requested,
        e,
    ))
}

/// toolgate's answer for a request no usable answer came for: the reason, or with
/// `errors.mask_internal` a reference under which the reason is logged (it may name the
/// server's address or a file path). Unmasked, the reason is logged as
/// [`crate::error::FailureLog`] says.
pub fn failed(
    gw: &Gateway,
    target: &Target,
    era: Era,
    id: Option<&RawValue>,
    requested: answer::Requested,
    e: &UpstreamError,
) -> answer::Answer {
    if !gw.config.errors.mask_internal {
        target.failures.failed(&target.name, e.kind(), e);
        return answer::Answer::upstream_failed(era, id, requested, e, None);
    }
    let reference = gw.next_id();
    tracing::warn!(upstream = %target.name, reference, error = %e, "masked toolgate's own error");
    answer::Answer::upstream_failed(era, id, requested, e, Some(&reference))
}

/// No answer will come for `m`, a message that was not decided: its server could not be
/// started for it, or went away while it was still unread. A request gets the answer
/// [`unanswered`] gives, and a call is counted as an upstream error under the name its
/// server listed ([`guard::UNLISTED`] for one it did not); anything else gets none.
pub fn undecided(
    gw: &Gateway,
    target: &Target,
    era: Era,
    m: &Message<'_>,
    e: &UpstreamError,
) -> Option<answer::Answer> {
    let id = m.id.filter(|_| m.is_request())?;
    let requested = match m.method() == Some(mcp::TOOLS_CALL) {
        true => {
            let name = m.params_name();
            let key = gw.scope(target, None, []);
            let tool = guard::listed_label(gw, &key, name.as_deref().unwrap_or(""));
            (target.series).tool_call(&gw.metrics, tool, e.outcome());
            answer::Requested::call(m.asks_for_task())
        }
        false => answer::Requested::Other,
    };
    Some(failed(gw, target, era, Some(id), requested, e))
}

#[derive(Deserialize)]
struct ListParams<'a> {
    #[serde(borrow, default)]
    cursor: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct ReadParams<'a> {
    #[serde(borrow, default)]
    uri: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct TaskParams<'a> {
    #[serde(borrow, rename = "taskId")]
    task_id: Cow<'a, str>,
}

/// The kind of a request other than `tools/call` (which [`guard`] classifies as it decides).
/// `follows_tasks`: a task's result is held to its call's rules (only under
/// `validation.output`, [`crate::tasks`]); otherwise it passes as any answer no rule reads.
pub fn classify(m: &Message<'_>, follows_tasks: bool) -> Kind {
    if !m.is_request() {
        return Kind::Other;
    }
    match m.method() {
        Some(mcp::TOOLS_LIST) => {
            let cursor = m
                .raw_params()
                .and_then(|p| serde_json::from_str::<ListParams<'_>>(p.get()).ok())
                .and_then(|p| p.cursor);
            Kind::List {
                first_page: cursor.is_none_or(|c| c.get() == "null"),
            }
        }
        Some(mcp::RESOURCES_READ) => Kind::Read {
            uri: m
                .raw_params()
                .and_then(|p| serde_json::from_str::<ReadParams<'_>>(p.get()).ok())
                .and_then(|p| p.uri)
                .map(|u| u.as_ref().into()),
        },
        Some(mcp::TASKS_RESULT) if follows_tasks => m
            .raw_params()
            .and_then(|p| serde_json::from_str::<TaskParams<'_>>(p.get()).ok())
            .filter(|p| p.task_id.len() <= crate::tasks::MAX_NAME)
            .map_or(Kind::Other, |p| Kind::TaskResult {
                task: p.task_id.as_ref().into(),
            }),
        _ => Kind::Other,
    }
}

/// What the rules made of one message from the upstream.
#[derive(Debug, Default)]
pub struct Observed {
    /// The message is the answer the pending request waits for.
    pub answers: bool,
    /// Send this instead of the message.
    pub replacement: Option<answer::Answer>,
}

/// Looks at one message coming back from the upstream for `pending`.
pub fn observe(gw: &Gateway, pending: &Pending, m: &Message<'_>) -> Observed {
    if m.method.is_some() {
        observe_unsolicited(gw, &pending.key, m);
        return Observed::default();
    }
    // A response that reaches a pending request answers it, whatever its id says: the transport
    // has already matched it (by value, through `jsonrpc::id_key`), or it came back on the
    // request's own exchange. Letting a differently spelled id skip the rules below would
    // give an upstream's answer the most lenient treatment instead of the strictest.
    let answers = pending.id.is_some() && (m.result.is_some() || m.error.is_some());
    if !answers {
        return Observed::default();
    }
    let replacement = match &pending.kind {
        Kind::List { first_page } => learn::list_answer(gw, pending, *first_page, m),
        Kind::Call { tool, retry, .. } => canon::call_answer(gw, pending, tool, *retry, m),
        Kind::Read { uri } => canon::read_answer(gw, pending, uri.as_deref(), m),
        Kind::TaskResult { task } => gw
            .tasks
            .tool(pending.key, task)
            .and_then(|tool| canon::call_answer(gw, pending, &tool, false, m)),
        Kind::Subscription(_) | Kind::Other => None,
    };
    Observed {
        answers,
        replacement,
    }
}

/// Looks at a message the upstream sent on its own (a notification, a request to the
/// client) in scope `key`: it is learned from (`tools/list_changed` drops the scope's
/// listing) and passes as it came.
pub fn observe_unsolicited(gw: &Gateway, key: &ScopeKey, m: &Message<'_>) {
    if m.method() == Some(mcp::TOOLS_LIST_CHANGED) {
        learn::list_changed(gw, key);
    }
}

/// What the client is sent for one message from the server about `pending`.
#[derive(Debug)]
pub struct Settled {
    /// The message as it came; the answer completed for its client's era
    /// ([`bridge::complete`]); or toolgate's replacement.
    pub body: Bytes,
    /// The message is the answer the pending request waits for.
    pub answers: bool,
    /// `body` is toolgate's replacement, not the server's message.
    pub rewritten: bool,
    /// The JSON-RPC error code of what is sent (the 2026-07-28 era maps it to an HTTP status).
    pub error_code: Option<i64>,
}

/// The server's message `m` (parsed from `bytes`) about `pending`, as its client reads it:
/// [`observe`]d, then toolgate's replacement where a rule rewrote it, else the answer
/// completed. Every transport sends what comes back through this, so the order (rules first,
/// completion only of what they left alone) is the same in every mode.
pub fn settle(gw: &Gateway, pending: &Pending, m: &Message<'_>, bytes: Bytes) -> Settled {
    let seen = observe(gw, pending, m);
    match seen.replacement {
        Some(a) => Settled {
            error_code: a.error_code,
            body: Bytes::from(a.body),
            answers: seen.answers,
            rewritten: true,
        },
        None => Settled {
            error_code: m.error_code(),
            body: match seen.answers {
                true => bridge::complete(pending, bytes),
                false => bytes,
            },
            answers: seen.answers,
            rewritten: false,
        },
    }
}

/// [`settle`] for bytes not yet parsed (an SSE event's data, a child's line); `None` when
/// they are not one JSON-RPC message, which the rules leave alone.
pub fn settle_bytes(gw: &Gateway, pending: &Pending, bytes: Bytes) -> Option<Settled> {
    match jsonrpc::parse(&bytes) {
        Ok(Parsed::Single(m)) => Some(settle(gw, pending, &m, bytes.clone())),
        _ => None,
    }
}
