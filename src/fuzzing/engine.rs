//! The whole engine as an application holds it: [`ValidateLayer`] around the example server,
//! in process, so that one input goes through the edge's reading, the guard, the era bridges,
//! the session held for a client of the other era, the answer rules and learning from
//! listings, with no socket and no second process.
//!
//! The runtime's clock is paused: it moves on whenever everything waits, so a stream that
//! stays open (a subscription, a slow tool) costs no time, and the wait for an answer is
//! bounded in the clock's time, not the machine's.

use crate::config::{Config, OutputMode};
use crate::demo;
use crate::mcp;
use crate::net::body::{ReadError, read_limited};
use crate::transport::sse;
use crate::{Validate, ValidateLayer};
use axum::body::Body;
use http::{HeaderValue, Request, Response, header};
use http_body_util::BodyExt;
use serde_json::Value;
use std::time::Duration;
use tokio::runtime::Runtime;
use tower_layer::Layer;
use tower_service::Service;

/// The `MCP-Protocol-Version` an input's first byte picks: none, both eras, and the era of
/// batches.
const VERSIONS: [Option<&str>; 4] = [
    None,
    Some("2025-11-25"),
    Some("2026-07-28"),
    Some("2025-03-26"),
];

/// Messages posted per input; the rest of an input is not sent.
const MESSAGES: usize = 6;

/// How long (in the paused clock's time) an answer may take: past the example server's
/// slowest tool, short of toolgate's upstream timeout.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// The most of an answer read: the example server's answers are far smaller.
const ANSWER_BYTES: usize = 4 * 1024 * 1024;

thread_local! {
    /// The runtime, and the layer around the example server answering in JSON and in SSE.
    static ENGINE: (Runtime, [Validate; 2]) = started();
}

/// `flags message NUL message …`: the flags (the first byte) pick the protocol version sent,
/// whether the headers a 2026-07-28 client names its request with go too, and whether the
/// server answers in SSE rather than JSON; the messages are posted in turn, in the session
/// the server opens if one does, which is ended after them. Every answer must be one a
/// client can read: JSON in a JSON body and in each SSE event's data, and a request's answer
/// under the request's id.
pub fn engine(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    ENGINE.with(|(rt, apps)| {
        let app = apps[usize::from(flags >> 3 & 1)].clone();
        rt.block_on(posted(app, flags, rest))
    });
}

fn started() -> (Runtime, [Validate; 2]) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("a runtime on this thread");
    let apps = {
        let _in = rt.enter();
        [false, true].map(|sse| {
            let mut cfg = Config::default();
            cfg.validation.output = OutputMode::Enforce;
            cfg.validation.deny_tools = vec!["enable_extra".into()];
            let options = demo::Options {
                seen_kept: 0,
                sse,
                ..demo::Options::default()
            };
            let (server, _) = demo::app(options);
            ValidateLayer::new(cfg)
                .expect("a fixed configuration is valid")
                .layer(server)
        })
    };
    (rt, apps)
}

async fn posted(mut app: Validate, flags: u8, messages: &[u8]) {
    let version = VERSIONS[usize::from(flags & 3)];
    let mut session: Option<HeaderValue> = None;
    for message in messages.split(|b| *b == 0).take(MESSAGES) {
        let mut req = Request::post("/mcp")
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::ACCEPT, "application/json, text/event-stream");
        if let Some(v) = version {
            req = req.header("mcp-protocol-version", v);
        }
        if let Some(s) = &session {
            req = req.header("mcp-session-id", s.clone());
        }
        if flags & 4 != 0 {
            for (name, value) in named(message) {
                if let Ok(value) = HeaderValue::from_str(&value) {
                    req = req.header(name, value);
                }
            }
        }
        let req = req
            .body(Body::from(message.to_vec()))
            .expect("a request of fixed parts");
        let Ok(resp) = app.call(req).await;
        if let Some(s) = resp.headers().get("mcp-session-id") {
            session = Some(s.clone());
        }
        answered(message, resp).await;
    }
    if let Some(s) = session {
        let req = Request::delete("/mcp")
            .header("mcp-session-id", s)
            .body(Body::empty())
            .expect("a request of fixed parts");
        let Ok(resp) = app.call(req).await;
        let _ = tokio::time::timeout(ANSWER_WAIT, resp.into_body().collect()).await;
    }
}

/// Holds an answer to what [`engine`] asks of every answer.
async fn answered(sent: &[u8], resp: Response<Body>) {
    let kind = resp.headers().get(header::CONTENT_TYPE).cloned();
    let kind = kind.as_ref().and_then(|k| k.to_str().ok()).unwrap_or("");
    let mut messages = Vec::new();
    if kind.starts_with("text/event-stream") {
        let events = sse::each_data(resp.into_body(), ANSWER_BYTES, |data| {
            messages.push(read(data.as_bytes(), "an SSE event's data"));
            true
        });
        // A stream that stays open (a subscription) ends here, its events so far held.
        let _ = tokio::time::timeout(ANSWER_WAIT, events).await;
    } else if kind.starts_with("application/json") {
        let body = read_limited(resp.into_body(), ANSWER_BYTES);
        match tokio::time::timeout(ANSWER_WAIT, body).await {
            Ok(Ok(body)) => messages.push(read(&body, "a JSON answer")),
            Ok(Err(ReadError::TooLarge)) => panic!("an answer within {ANSWER_BYTES} bytes"),
            // An answer that breaks off is the client's to see; there is nothing to read.
            Ok(Err(_)) => {}
            Err(_) => panic!("a JSON answer ends"),
        }
    }
    let sent: Value = match serde_json::from_slice(sent) {
        Ok(sent) => sent,
        Err(_) => return,
    };
    // A batch's answer, an array, answers the batch's requests alone.
    if let (Value::Array(batch), [Value::Array(answers)]) = (&sent, &messages[..]) {
        let ids: Vec<&Value> = batch.iter().filter_map(request_id).collect();
        let readable = |a: &&Value| under_id(a) && is_one_way(&a["id"]);
        for answer in answers.iter().filter(readable) {
            assert!(
                ids.contains(&&answer["id"]),
                "a batch's answer, under its requests' ids"
            );
        }
        return;
    }
    let Some(id) = request_id(&sent) else {
        return;
    };
    for answer in messages.iter().filter(|a| under_id(a)) {
        assert_eq!(
            answer.get("id"),
            Some(id),
            "a request's answer, under its id"
        );
    }
}

/// Whether an answer names a request: an error without an id answers a request toolgate
/// could not take as one.
fn under_id(answer: &Value) -> bool {
    answer.get("result").is_some() || answer.get("error").is_some() && !answer["id"].is_null()
}

/// The `Mcp-Method` and `Mcp-Name` headers a 2026-07-28 client sends with `message`.
fn named(message: &[u8]) -> Vec<(http::HeaderName, String)> {
    let Ok(m) = serde_json::from_slice::<Value>(message) else {
        return Vec::new();
    };
    let name = m["params"].get("name").or(m["params"].get("uri"));
    [
        (mcp::METHOD_HEADER, &m["method"]),
        (mcp::NAME_HEADER, name.unwrap_or(&Value::Null)),
    ]
    .into_iter()
    .filter_map(|(header, v)| Some((header, v.as_str()?.to_owned())))
    .collect()
}

/// What a client reads from an answer: JSON, or this fails.
fn read(bytes: &[u8], what: &str) -> Value {
    match serde_json::from_slice(bytes) {
        Ok(v) => v,
        // JSON all the same: a number past `f64` (an id of `1e400`, answered as the client
        // wrote it), which no `Value` holds. Nothing in it is compared.
        Err(_) if serde_json::from_slice::<&serde_json::value::RawValue>(bytes).is_ok() => {
            Value::Null
        }
        Err(e) => panic!("{what} is JSON ({e}): {:?}", String::from_utf8_lossy(bytes)),
    }
}

/// Whether an id reads back as it was written: a string, or an integer within 64 bits.
fn is_one_way(id: &Value) -> bool {
    id.is_string() || id.is_i64()
}

/// The id of a request, which its answer must carry: a message that names a method and no
/// result or error, well-formed or not (an invalid request is answered under its id too).
fn request_id(sent: &Value) -> Option<&Value> {
    let m = sent.as_object()?;
    let id = m.get("id").filter(|id| is_one_way(id))?;
    let asked = m.get("method").is_some_and(|m| !m.is_null())
        && !m.contains_key("result")
        && !m.contains_key("error");
    asked.then_some(id)
}
