//! The response side of a forwarded request: pass the answer through, learning from it on
//! the way.
//!
//! - A `tools/list` answer (JSON or inside an SSE stream) teaches the catalog that scope's
//!   schemas before the client sees it, so the client's next call is never a miss.
//! - `notifications/tools/list_changed`, on any stream, drops that scope's catalog.
//! - A session that ended (404) drops its catalog.
//! - A stream that breaks before answering a request toolgate forwarded gets an answer
//!   written by toolgate, so the client never waits forever. A stream that ends cleanly
//!   after announcing event ids is left alone: the client may resume it (SEP-1699).
//!
//! Untouched events and bodies go out byte for byte and are never buffered whole.

use super::{Gateway, reply};
use crate::catalog::{Page, ScopeKey};
use crate::jsonrpc::{self, Body as Parsed};
use crate::mcp::{self, Era};
use crate::sse::{self, Split, Splitter};
use crate::upstream::{self, Collected, UpstreamError};
use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::StatusCode;
use http::header::CONTENT_TYPE;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::value::RawValue;
use std::collections::VecDeque;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Call,
    List { first_page: bool },
    Other,
}

/// What a forwarded message waits for.
pub struct Pending {
    /// The request's id; `None` for notifications, responses and bodiless methods.
    pub id: Option<Box<RawValue>>,
    pub kind: Kind,
    pub era: Era,
    pub key: ScopeKey,
    pub has_session: bool,
}

pub async fn response(
    gw: &Arc<Gateway>,
    pending: Pending,
    resp: http::Response<Incoming>,
) -> Response {
    if resp.status() == StatusCode::NOT_FOUND && pending.has_session {
        // The session is gone upstream; so is what its tools were.
        gw.catalog.forget(&pending.key);
    }
    let (mut parts, body) = resp.into_parts();
    parts.headers = upstream::end_to_end(&parts.headers);
    let media = parts
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default();
    let body = if media == "text/event-stream" {
        sse_stream(SseInspector::new(gw.clone(), pending), body)
    } else if media == "application/json"
        && matches!(pending.kind, Kind::List { .. })
        && parts.status.is_success()
    {
        match upstream::collect_upstream(body, gw.config.limits.max_response_bytes).await {
            Ok(Collected::Whole(bytes)) => {
                learn_list_answer(gw, &pending, &bytes);
                Body::from(bytes)
            }
            Ok(Collected::TooLarge(rest)) => {
                tracing::warn!(upstream = %pending.key.upstream, "tools/list answer over max_response_bytes: passed through unread");
                rest
            }
            Err(e) => {
                let e = UpstreamError::Unreachable(format!("the answer broke off: {e}"));
                return reply::upstream_failed(pending.era, pending.id.as_deref(), false, &e);
            }
        }
    } else {
        Body::new(body)
    };
    Response::from_parts(parts, body)
}

/// Learns from one JSON-RPC message if it answers the pending `tools/list`.
fn learn_list_answer(gw: &Gateway, pending: &Pending, bytes: &[u8]) -> bool {
    let (Kind::List { first_page }, Some(id)) = (pending.kind, &pending.id) else {
        return false;
    };
    let Ok(Parsed::Single(m)) = jsonrpc::parse(bytes) else {
        return false;
    };
    if m.method.is_some() || m.id.map(RawValue::get) != Some(id.get()) {
        return false;
    }
    if let Some(result) = m.result {
        match Page::parse(result) {
            Ok(page) => gw.catalog.learn_page(&pending.key, &page, first_page),
            Err(e) => {
                tracing::warn!(upstream = %pending.key.upstream, error = %e, "could not read a tools/list answer")
            }
        }
    }
    true
}

struct SseInspector {
    gw: Arc<Gateway>,
    pending: Pending,
    splitter: Splitter,
    /// Past an oversized event, the stream passes through uninspected.
    raw: bool,
    answered: bool,
    /// The upstream numbers its events, so a clean end may be resumed by the client.
    resumable: bool,
    out: VecDeque<Bytes>,
}

impl SseInspector {
    fn new(gw: Arc<Gateway>, pending: Pending) -> SseInspector {
        let max = gw.config.limits.max_sse_event_bytes;
        SseInspector {
            gw,
            pending,
            splitter: Splitter::new(max),
            raw: false,
            answered: false,
            resumable: false,
            out: VecDeque::new(),
        }
    }

    fn feed(&mut self, chunk: Bytes) {
        if self.raw {
            self.out.push_back(chunk);
            return;
        }
        self.splitter.push(&chunk);
        while let Some(split) = self.splitter.next_event() {
            match split {
                Split::Event(ev) => {
                    self.on_event(&ev);
                    self.out.push_back(ev);
                }
                Split::Overflow(held) => {
                    tracing::warn!(upstream = %self.pending.key.upstream, "SSE event over max_sse_event_bytes: rest of the stream passed through uninspected");
                    self.raw = true;
                    self.out.push_back(held);
                    break;
                }
            }
        }
    }

    fn on_event(&mut self, ev: &[u8]) {
        if !self.resumable && (ev.starts_with(b"id:") || ev.windows(4).any(|w| w == b"\nid:")) {
            self.resumable = true;
        }
        let Some(data) = sse::data(ev) else { return };
        if data.is_empty() {
            return;
        }
        if data.contains(mcp::TOOLS_LIST_CHANGED)
            && let Ok(Parsed::Single(m)) = jsonrpc::parse(data.as_bytes())
            && m.method() == Some(mcp::TOOLS_LIST_CHANGED)
        {
            tracing::debug!(upstream = %self.pending.key.upstream, "tools/list_changed: catalog dropped");
            self.gw.catalog.forget(&self.pending.key);
        }
        if self.answered {
            return;
        }
        let Some(id) = &self.pending.id else { return };
        if !data.contains(id.get()) {
            return;
        }
        if matches!(self.pending.kind, Kind::List { .. }) {
            self.answered = learn_list_answer(&self.gw, &self.pending, data.as_bytes());
        } else if let Ok(Parsed::Single(m)) = jsonrpc::parse(data.as_bytes()) {
            self.answered = m.method.is_none() && m.id.map(RawValue::get) == Some(id.get());
        }
    }

    fn end(&mut self, broke: Option<String>) {
        if let Some(rest) = self.splitter.finish() {
            self.out.push_back(rest);
        }
        let Some(id) = &self.pending.id else { return };
        if self.answered || self.raw || (broke.is_none() && self.resumable) {
            return;
        }
        let why = UpstreamError::Unreachable(match broke {
            Some(e) => format!("the stream broke before the answer: {e}"),
            None => "the stream ended without an answer".into(),
        });
        let body = if self.pending.kind == Kind::Call {
            let details =
                serde_json::json!({"code": "upstream_unavailable", "reason": why.to_string()});
            let result = mcp::tool_error(
                self.pending.era,
                reply::unavailable_text(&why),
                Some(("toolgate/upstream", details)),
            );
            jsonrpc::result_response(id, &result)
        } else {
            jsonrpc::error_response(
                Some(id),
                jsonrpc::INTERNAL_ERROR,
                &format!("Upstream MCP server unavailable: {why}"),
                None,
            )
        };
        self.out.push_back(sse::event(&body));
    }
}

/// Streams the upstream body through the inspector, one event at a time.
fn sse_stream(inspector: SseInspector, body: Incoming) -> Body {
    struct State {
        insp: SseInspector,
        body: Incoming,
        done: bool,
    }
    let stream = futures_util::stream::unfold(
        State {
            insp: inspector,
            body,
            done: false,
        },
        |mut st| async move {
            loop {
                if let Some(b) = st.insp.out.pop_front() {
                    return Some((Ok::<_, std::convert::Infallible>(b), st));
                }
                if st.done {
                    return None;
                }
                match st.body.frame().await {
                    Some(Ok(frame)) => {
                        if let Ok(data) = frame.into_data() {
                            st.insp.feed(data);
                        }
                    }
                    Some(Err(e)) => {
                        st.done = true;
                        st.insp.end(Some(e.to_string()));
                    }
                    None => {
                        st.done = true;
                        st.insp.end(None);
                    }
                }
            }
        },
    );
    Body::from_stream(stream)
}
