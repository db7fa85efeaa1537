//! The stdio front's spans: one server span per request, begun when its line is read and
//! ended when its answer is written (or toolgate answers it, or the client cancels it). They
//! say what the HTTP edge's say, through `telemetry::SpanFacts`; what only HTTP has (a
//! status, a session header) they leave out.

use crate::gateway::Gateway;
use crate::jsonrpc::{self, Message};
use crate::locks::MutexExt;
use crate::metrics;
use crate::telemetry::hop::HopParent;
use crate::telemetry::{Context, RequestTrace, SpanFacts};
use std::collections::HashMap;
use std::sync::Mutex;

/// A request's span, from its line until its answer.
pub(super) struct Begun {
    trace: RequestTrace,
    method: &'static str,
    tool: Option<Box<str>>,
}

impl Begun {
    /// The span of request `m`, when traces are exported; read before the guard takes its
    /// params (the tool's name).
    pub(super) fn of(gw: &Gateway, m: &Message<'_>) -> Option<Begun> {
        let tel = gw.telemetry.as_ref()?;
        let id = m.id.filter(|_| m.is_request())?;
        let mut trace = RequestTrace::begin(tel, Context::from_meta(m));
        trace.request_id = Some(id.get().trim_matches('"').to_owned());
        Some(Begun {
            trace,
            method: metrics::method_label(m.method()),
            tool: m
                .params_name()
                .map(|n| crate::text::clipped(&n, 200).into()),
        })
    }

    /// What the request's hop to the server hangs under: the way to the server starts
    /// and ends it, as for the HTTP edge.
    pub(super) fn hop_parent(&self) -> HopParent {
        self.trace.hop_parent()
    }

    /// Ends the span: what became of the request, and why when toolgate answered a call.
    pub(super) fn end(self, outcome: &str, validation: Option<&'static str>, upstream: &str) {
        let facts = SpanFacts {
            method: self.method,
            tool: self.tool.as_deref(),
            outcome,
            validation,
            upstream,
        };
        self.trace.finish_with(&facts, Vec::new());
    }
}

/// The spans of the requests forwarded and not yet answered, by id (`jsonrpc::id_key`).
#[derive(Default)]
pub(super) struct Traces(Mutex<HashMap<String, (Begun, Option<&'static str>)>>);

impl Traces {
    /// `begun` waits for the answer to request `id`; `validation` is what the guard made of
    /// it (`forwarded`, `coerced`, `audited`).
    pub(super) fn wait(
        &self,
        id: &serde_json::value::RawValue,
        begun: Begun,
        validation: Option<&'static str>,
    ) {
        let key = jsonrpc::id_key(id.get()).into_owned();
        self.0.locked().insert(key, (begun, validation));
    }

    /// Request `id` is answered (`forwarded`), failed (`upstream_error`) or cancelled.
    pub(super) fn end(&self, id: &str, outcome: &str, upstream: &str) {
        let open = self.0.locked().remove(jsonrpc::id_key(id).as_ref());
        if let Some((begun, validation)) = open {
            begun.end(outcome, validation, upstream);
        }
    }
}
