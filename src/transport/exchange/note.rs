//! What the fronts and the way to a server say of one message as it goes: its note (for the
//! access log, the metrics and the trace), what sending it reads of it, and how a streamed
//! answer settled after its head went out.

use crate::gateway::Gateway;
use crate::telemetry;
use crate::telemetry::hop::{Hop, HopContext, HopParent, HopTo};
use http::HeaderValue;
use serde_json::value::RawValue;
use std::sync::Arc;

/// What a streamed answer settled as after its head went out, put in the answer's
/// extensions by the stream and read by `observe` when the stream ends: the span of a request
/// whose stream broke before its answer then ends with toolgate's answer, as over stdio.
#[derive(Clone, Default)]
pub(crate) struct StreamOutcome(Arc<std::sync::OnceLock<&'static str>>);

impl StreamOutcome {
    pub(crate) fn set(&self, outcome: &'static str) {
        let _ = self.0.set(outcome);
    }

    pub(crate) fn get(&self) -> Option<&'static str> {
        self.0.get().copied()
    }
}

/// What the access log, the request metrics and the trace say about one request.
#[derive(Default)]
pub(crate) struct Note {
    /// The target the request was routed to; a request for no endpoint is not counted.
    pub(crate) target: Option<usize>,
    /// Its `X-Request-Id` (see `request_id`).
    pub(crate) request_id: Option<HeaderValue>,
    pub(crate) client: Option<Arc<str>>,
    pub(crate) method: &'static str,
    pub(crate) tool: Option<Box<str>>,
    pub(crate) outcome: &'static str,
    /// The request's spans, when traces are exported.
    pub(crate) trace: Option<Box<telemetry::RequestTrace>>,
    /// What its hops hang under when its span is kept elsewhere (the stdio front's). Boxed:
    /// every request's note is moved through the edge's layers, and this is rare.
    pub(crate) hop_parent: Option<Box<HopParent>>,
    /// What the guard made of a `tools/call` (`forwarded`, `rejected_invalid`, …).
    pub(crate) validation: Option<&'static str>,
}

impl Note {
    /// Whether the tool's name is wanted (by the access log or a span): only then is it kept.
    pub(crate) fn wants_names(&self, gw: &Gateway) -> bool {
        gw.config.log.access || self.trace.is_some()
    }

    /// What the access log and the trace say of a message that goes to the server: for a
    /// call, its tool and what the guard made of it (kept only when wanted).
    pub(crate) fn forwarding(&mut self, gw: &Gateway, kind: &crate::pipeline::Kind) {
        if self.wants_names(gw)
            && let crate::pipeline::Kind::Call { tool, .. } = kind
        {
            self.tool = Some(tool.clone());
            self.validation = kind.call_outcome();
        }
    }

    /// Starts the span of a hop of the message to `to`, when traces are exported: the way to
    /// each kind of server starts and ends its hops, for every front.
    pub(crate) fn hop(&self, to: HopTo<'_>) -> Option<(Hop, HopContext)> {
        let parent = match (&self.trace, &self.hop_parent) {
            (Some(trace), _) => trace.hop_parent(),
            (None, Some(parent)) => HopParent::clone(parent),
            (None, None) => return None,
        };
        Some(parent.hop(self.method, to))
    }

    /// A request nothing has been learnt of yet: refused unless something says otherwise.
    pub(crate) fn new() -> Note {
        Note {
            method: "-",
            outcome: "rejected",
            ..Note::default()
        }
    }
}

/// What sending a message reads of it once the guard has taken a call's params: its id, its
/// method (as `Note::method` labels it), and its params left as text.
#[derive(Clone, Copy)]
pub(crate) struct Said<'a> {
    pub(crate) id: Option<&'a RawValue>,
    pub(crate) method: &'static str,
    pub(crate) params: Option<&'a RawValue>,
    /// The request a `notifications/cancelled` names.
    pub(crate) cancelled: Option<&'a RawValue>,
}

impl<'a> Said<'a> {
    /// `method` is the message's label (`metrics::method_label`), already read for the note.
    pub(crate) fn of(m: &crate::jsonrpc::Message<'a>, method: &'static str) -> Said<'a> {
        Said {
            id: m.id,
            method,
            params: m.raw_params(),
            cancelled: match method {
                "notifications/cancelled" => m.cancelled_id(),
                _ => None,
            },
        }
    }
}
